import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayWire
import RingRelayTesting
import Testing

@Suite struct ScopingTests {
    @Test func oneAccountCannotSeeOrTouchAnothersBindings() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let a = try await client.createAccount("a", admin: server.adminToken).apiKey
            let b = try await client.createAccount("b", admin: server.adminToken).apiKey
            let binding = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"tok"}"#, token: a)

            // 404, not 403: B must not learn that the id exists.
            let get = try await client.send(.get, "/v1/bindings/\(binding.id)", token: b)
            #expect(get.status == .notFound)
            #expect(get.errorCode == "binding_not_found")
            #expect(try await client.send(.delete, "/v1/bindings/\(binding.id)", token: b).status == .notFound)
            #expect(try await client.send(.get, "/v1/bindings?identity=bob", token: b).decode(BindingList.self).data.isEmpty)
            let wipe = try await client.send(.delete, "/v1/bindings?identity=bob", token: b).decode(DeletedBindings.self)
            #expect(wipe.deleted == 0)
            let batch = try await client.send(.post, "/v1/bindings/batch", token: b, json: #"{"delete":["\#(binding.id)"]}"#)
            #expect(try batch.decode(BindingBatchResponse.self).delete.first?.status == 404)

            // The same token registered in B is B's own binding; A's is untouched.
            let other = try await client.createBinding(#"{"identity":"eve","type":"fcm","token":"tok"}"#, token: b)
            #expect(other.id != binding.id)
            #expect(try await client.send(.get, "/v1/bindings/\(binding.id)", token: a).decode(BindingResource.self).identity == "bob")
        }
    }

    @Test func deviceTokenReachesOnlyItsOwnIdentity() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let bobs = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"bob-phone"}"#, token: key)
            let alice = try await client.accessToken(identity: "alice", deviceID: "alice-phone", key: key)

            // Registering without an identity uses the token's identity and device.
            let own = try await client.createBinding(#"{"type":"fcm","token":"alice-phone"}"#, token: alice)
            #expect(own.identity == "alice")
            #expect(own.deviceId == "alice-phone")

            let forBob = try await client.send(.post, "/v1/bindings", token: alice, json: #"{"identity":"bob","type":"fcm","token":"x"}"#)
            #expect(forBob.status == .forbidden)
            #expect(try await client.send(.get, "/v1/bindings/\(bobs.id)", token: alice).status == .notFound)
            #expect(try await client.send(.delete, "/v1/bindings/\(bobs.id)", token: alice).status == .notFound)
            #expect(try await client.send(.get, "/v1/bindings?identity=bob", token: alice).status == .forbidden)
            let list = try await client.send(.get, "/v1/bindings", token: alice).decode(BindingList.self)
            #expect(list.data.map(\.id) == [own.id])
            #expect(try await client.send(.get, "/v1/bindings/\(own.id)", token: alice).status == .ok)

            // Account-only endpoints refuse device tokens.
            #expect(try await client.send(.delete, "/v1/bindings?identity=alice", token: alice).status == .forbidden)
            #expect(try await client.send(.post, "/v1/bindings/batch", token: alice, json: "{}").status == .forbidden)
            #expect(try await client.send(.get, "/v1/credentials", token: alice).status == .forbidden)
            #expect(try await client.send(.post, "/v1/access-tokens", token: alice, json: #"{"identity":"bob","deviceId":"d"}"#).status == .forbidden)
            #expect(try await client.send(.delete, "/v1/bindings/\(own.id)", token: alice).status == .noContent)
        }
    }

    @Test func accessTokensExpireAndCannotBeForged() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let token = try await client.accessToken(identity: "alice", key: key, ttl: 120)
            #expect(try await client.send(.get, "/v1/bindings", token: token).status == .ok)

            // Change one character of the signature.
            let last = token.last == "A" ? "B" : "A"
            let forged = String(token.dropLast()) + last
            let response = try await client.send(.get, "/v1/bindings", token: forged)
            #expect(response.status == .unauthorized)
            #expect(response.errorCode == "invalid_access_token")

            server.clock.advance(by: 121)
            let expired = try await client.send(.get, "/v1/bindings", token: token)
            #expect(expired.status == .unauthorized)
            #expect(expired.errorCode == "expired_access_token")

            for ttl in [59, 86_401] {
                let bad = try await client.send(.post, "/v1/access-tokens", token: key, json: #"{"identity":"a","deviceId":"d","ttlSeconds":\#(ttl)}"#)
                #expect(bad.status == .unprocessableContent)
            }
        }
    }

    @Test func accessTokenWorksAsQueryParameter() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let token = try await client.accessToken(identity: "alice", key: key)
            #expect(try await client.send(.get, "/v1/bindings?access_token=\(token)").status == .ok)
            #expect(try await client.send(.get, "/v1/bindings?identity=alice&access_token=\(token)").status == .ok)
            // Without it the request has no credential at all.
            #expect(try await client.send(.get, "/v1/bindings?identity=alice").status == .unauthorized)
        }
    }
}
