import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayWire
import Testing

@Suite struct AccountsTests {
    /// An operation without a body still reads what it is given and checks it strictly.
    @Test func creatingAKeyChecksTheBodyItIsGiven() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let account = try await client.createAccount("acme", admin: server.adminToken)
            let path = "/v1/accounts/\(account.id)/keys"
            let huge = #"{"\#(String(repeating: "x", count: 1 << 20))":1}"#
            let tooLarge = try await client.send(.post, path, token: server.adminToken, json: huge)
            #expect(tooLarge.status == .contentTooLarge)
            let unknown = try await client.send(.post, path, token: server.adminToken, json: #"{"name":"rotation"}"#)
            #expect(unknown.status == .unprocessableContent)
            #expect(unknown.errorCode == "unknown_field")
            let notJSON = try await client.send(.post, path, token: server.adminToken, json: "key please")
            #expect(notJSON.status == .badRequest)
            #expect(try await client.send(.post, path, token: server.adminToken, json: "{}").status == .created)
            #expect(try await client.send(.post, path, token: server.adminToken).status == .created)
        }
    }

    /// An operation that takes no body refuses one, whatever it holds, and does nothing: a DELETE
    /// with a megabyte of unknown fields used to revoke the key and answer 204.
    @Test func operationsWithoutABodyRefuseOne() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let admin = server.adminToken
            let account = try await client.createAccount("acme", admin: admin)
            let key = try await client.send(.post, "/v1/accounts/\(account.id)/keys", token: admin).decode(CreatedKey.self)
            let revoke = "/v1/accounts/\(account.id)/keys/\(key.id)"
            for body in [#"{"\#(String(repeating: "x", count: 1 << 20))":1}"#, "{}", " "] {
                let refused = try await client.send(.delete, revoke, token: admin, json: body)
                #expect(refused.status == .contentTooLarge, "\(body.prefix(20))")
                #expect(refused.errorCode == "body_too_large")
                #expect(String(buffer: refused.body).contains("takes no request body"))
            }
            #expect(try await client.send(.get, "/v1/bindings", token: key.apiKey).status == .ok, "the key was revoked")
            for (method, path, token) in [(HTTPRequest.Method.get, "/v1/accounts", admin), (.get, "/v1/bindings", key.apiKey), (.get, "/healthz", nil)] {
                #expect(try await client.send(method, path, token: token, json: "{}").errorCode == "body_too_large", "\(path)")
            }
            // No body, or an empty one, is what these operations take.
            #expect(try await client.send(.get, "/v1/accounts", token: admin, json: "").status == .ok)
            #expect(try await client.send(.delete, revoke, token: admin).status == .noContent)
            #expect(try await client.send(.get, "/v1/bindings", token: key.apiKey).status == .unauthorized)
        }
    }

    @Test func adminCreatesListsAndDeletesAccounts() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let acme = try await client.createAccount("acme", admin: server.adminToken)
            #expect(acme.id.hasPrefix("acc_"))
            #expect(acme.apiKey.hasPrefix("rrk_"))

            let list = try await client.send(.get, "/v1/accounts", token: server.adminToken).decode(AccountList.self)
            #expect(list.data.map(\.name) == ["acme"])

            let duplicate = try await client.send(.post, "/v1/accounts", token: server.adminToken, json: #"{"name":"acme"}"#)
            #expect(duplicate.status == .conflict)
            #expect(duplicate.errorCode == "account_name_taken")

            #expect(try await client.send(.delete, "/v1/accounts/\(acme.id)", token: server.adminToken).status == .noContent)
            #expect(try await client.send(.delete, "/v1/accounts/\(acme.id)", token: server.adminToken).status == .notFound)
            // The deleted account's key dies with it.
            #expect(try await client.send(.get, "/v1/bindings", token: acme.apiKey).status == .unauthorized)
        }
    }

    @Test func accountEndpointsNeedTheAdminToken() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let acme = try await client.createAccount("acme", admin: server.adminToken)
            let anonymous = try await client.send(.get, "/v1/accounts")
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.errorCode == "missing_credentials")
            #expect(anonymous.headers[.wwwAuthenticate] == "Bearer")
            let withKey = try await client.send(.get, "/v1/accounts", token: acme.apiKey)
            #expect(withKey.status == .forbidden)
            let wrong = try await client.send(.get, "/v1/accounts", token: "not-the-admin-token")
            #expect(wrong.status == .unauthorized)
            #expect(wrong.errorCode == "invalid_credentials")
        }
    }

    @Test func revokedKeyStopsWorkingAndNewKeyWorks() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let acme = try await client.createAccount("acme", admin: server.adminToken)
            let second = try await client.send(.post, "/v1/accounts/\(acme.id)/keys", token: server.adminToken).decode(CreatedKey.self)
            #expect(second.apiKey != acme.apiKey)
            #expect(try await client.send(.get, "/v1/bindings", token: second.apiKey).status == .ok)

            #expect(try await client.send(.delete, "/v1/accounts/\(acme.id)/keys/\(acme.keyId)", token: server.adminToken).status == .noContent)
            let revoked = try await client.send(.get, "/v1/bindings", token: acme.apiKey)
            #expect(revoked.status == .unauthorized)
            #expect(revoked.errorCode == "invalid_api_key")
            #expect(try await client.send(.get, "/v1/bindings", token: second.apiKey).status == .ok)
            // Revoking twice, or a key of another account, is 404.
            #expect(try await client.send(.delete, "/v1/accounts/\(acme.id)/keys/\(acme.keyId)", token: server.adminToken).status == .notFound)
            #expect(try await client.send(.post, "/v1/accounts/acc_missing/keys", token: server.adminToken).status == .notFound)
        }
    }

    @Test(arguments: ["", "has space", String(repeating: "a", count: 65), "ünïcode"])
    func badAccountNamesAreRejected(name: String) async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let response = try await client.send(.post, "/v1/accounts", token: server.adminToken, json: #"{"name":"\#(name)"}"#)
            #expect(response.status == .unprocessableContent)
            #expect(response.errorCode == "invalid_field")
        }
    }
}
