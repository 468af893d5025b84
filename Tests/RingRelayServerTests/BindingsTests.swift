import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayWire
import RingRelayTesting
import RingRelayServer
import Testing

@Suite struct BindingsTests {
    @Test func createGetListAndDelete() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let token = apnsToken(seed: 1).uppercased()
            let binding = try await client.createBinding(
                #"{"identity":"bob","type":"apns_voip","token":"\#(token)","environment":"sandbox","deviceId":"iphone-1"}"#, token: key)
            #expect(binding.id.hasPrefix("bnd_"))
            #expect(binding.token == token.lowercased())
            #expect(binding.environment == "sandbox")
            #expect(binding.status == "active")
            #expect(binding.deviceId == "iphone-1")

            let fcm = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"fcm:token-1"}"#, token: key)
            #expect(fcm.environment == nil)
            let alert = try await client.createBinding(#"{"identity":"bob","type":"apns_alert","token":"\#(apnsToken(seed: 2))"}"#, token: key)
            #expect(alert.environment == "production")

            let fetched = try await client.send(.get, "/v1/bindings/\(binding.id)", token: key).decode(BindingResource.self)
            #expect(fetched == binding)

            let onlyFCM = try await client.send(.get, "/v1/bindings?identity=bob&type=fcm", token: key).decode(BindingList.self)
            #expect(onlyFCM.data.map(\.id) == [fcm.id])
            #expect(onlyFCM.nextCursor == nil)
            let invalid = try await client.send(.get, "/v1/bindings?status=invalid", token: key).decode(BindingList.self)
            #expect(invalid.data.isEmpty)

            #expect(try await client.send(.delete, "/v1/bindings/\(binding.id)", token: key).status == .noContent)
            #expect(try await client.send(.get, "/v1/bindings/\(binding.id)", token: key).status == .notFound)
            let deleted = try await client.send(.delete, "/v1/bindings?identity=bob", token: key).decode(DeletedBindings.self)
            #expect(deleted.deleted == 2)
            #expect(try await client.send(.get, "/v1/bindings", token: key).decode(BindingList.self).data.isEmpty)
        }
    }

    @Test func samTokenPostedAgainIsIdempotentAndMovesToTheNewIdentity() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let token = apnsToken(seed: 3)
            let first = try await client.createBinding(#"{"identity":"alice","type":"apns_voip","token":"\#(token)"}"#, token: key)
            let again = try await client.createBinding(#"{"identity":"alice","type":"apns_voip","token":"\#(token)"}"#, token: key, expect: .ok)
            #expect(again.id == first.id)
            let moved = try await client.createBinding(#"{"identity":"bob","type":"apns_voip","token":"\#(token)"}"#, token: key, expect: .ok)
            #expect(moved.id == first.id)
            #expect(moved.identity == "bob")
            #expect(try await client.send(.get, "/v1/bindings?identity=alice", token: key).decode(BindingList.self).data.isEmpty)
            // The same token as another type is a different binding.
            _ = try await client.createBinding(#"{"identity":"bob","type":"apns_alert","token":"\#(token)"}"#, token: key)
            #expect(try await client.send(.get, "/v1/bindings?identity=bob", token: key).decode(BindingList.self).data.count == 2)
        }
    }

    @Test func paginationVisitsEveryBindingOnceInCreationOrder() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            var created: [String] = []
            for index in 0..<23 {
                server.clock.advance(by: 0.01)
                created.append(try await client.createBinding(#"{"identity":"user-\#(index % 3)","type":"fcm","token":"t-\#(index)"}"#, token: key).id)
            }
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let uri = "/v1/bindings?limit=5" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await client.send(.get, uri, token: key).decode(BindingList.self)
                seen += page.data.map(\.id)
                cursor = page.nextCursor
                pages += 1
                if pages == 2 {
                    // Writes between pages neither repeat nor skip what was already there.
                    server.clock.advance(by: 1)
                    _ = try await client.createBinding(#"{"identity":"late","type":"fcm","token":"late"}"#, token: key)
                    _ = try await client.send(.delete, "/v1/bindings/\(created[0])", token: key)
                }
            } while cursor != nil
            #expect(pages == 5)
            #expect(Set(seen).count == seen.count)
            #expect(Array(seen.prefix(23)) == created)
            #expect(seen.count == 24)
            let bad = try await client.send(.get, "/v1/bindings?cursor=not-a-cursor", token: key)
            #expect(bad.status == .unprocessableContent)
            #expect(bad.errorCode == "invalid_cursor")
        }
    }

    @Test func batchReportsEachItemAndKeepsTheGoodOnes() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let existing = try await client.createBinding(#"{"identity":"carol","type":"fcm","token":"old"}"#, token: key)
            let body = """
                {"upsert":[
                  {"identity":"dave","type":"apns_voip","token":"\(apnsToken(seed: 9))"},
                  {"identity":"dave","type":"apns_voip","token":"xyz"},
                  {"identity":"dave","type":"fcm","token":"new","colour":"red"},
                  {"identity":"dave","type":"fcm"},
                  {"identity":"dave","type":"fcm","token":"old"},
                  42
                ],
                "delete":["\(existing.id)","bnd_unknown"]}
                """
            let response = try await client.send(.post, "/v1/bindings/batch", token: key, json: body)
            #expect(response.status == .ok)
            let result = try response.decode(BindingBatchResponse.self)
            #expect(result.upsert.map(\.status) == [201, 422, 422, 422, 200, 422])
            #expect(result.upsert.map(\.index) == [0, 1, 2, 3, 4, 5])
            #expect(result.upsert[1].error?.code == "invalid_token")
            #expect(result.upsert[2].error?.code == "unknown_field")
            #expect(result.upsert[3].error?.code == "missing_field")
            #expect(result.upsert[5].error?.code == "invalid_body")
            #expect(result.upsert[4].binding?.id == existing.id)
            // Items run in order: item 4 moved the binding to dave, then the delete removed it.
            #expect(result.delete.map(\.status) == [204, 404])
            let dave = try await client.send(.get, "/v1/bindings?identity=dave", token: key).decode(BindingList.self)
            #expect(dave.data.map(\.type) == ["apns_voip"])
        }
    }

    /// The documented maximum, 500 items with ordinary FCM tokens (~160 bytes each, 100 KB in
    /// all), is accepted: the 64 KiB limit of other bodies refused it with 413.
    @Test func aBatchOfTheDocumentedMaximumIsAccepted() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let token = String(repeating: "f", count: 140)
            let items = (0..<500).map { #"{"identity":"user-\#($0)","type":"fcm","token":"\#(token)\#($0)"}"# }.joined(separator: ",")
            let body = #"{"upsert":[\#(items)]}"#
            #expect(body.utf8.count > 64 * 1024)
            let response = try await client.send(.post, "/v1/bindings/batch", token: key, json: body)
            #expect(response.status == .ok, "\(response.errorCode ?? "")")
            let listed = try await client.send(.get, "/v1/bindings?limit=500", token: key).decode(BindingList.self)
            #expect(listed.data.count == 500)
        }
    }

    @Test func batchOver500ItemsIsRejectedWhole() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let items = (0..<501).map { #"{"identity":"u","type":"fcm","token":"t\#($0)"}"# }.joined(separator: ",")
            let response = try await client.send(.post, "/v1/bindings/batch", token: key, json: #"{"upsert":[\#(items)]}"#)
            #expect(response.status == .unprocessableContent)
            #expect(response.errorCode == "batch_too_large")
            #expect(try await client.send(.get, "/v1/bindings", token: key).decode(BindingList.self).data.isEmpty)
        }
    }

    @Test(arguments: [
        (#"{"identity":"bob","type":"apns_voip","token":"zz\#(apnsToken(seed: 1).dropFirst(2))"}"#, "invalid_token"),
        (#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 1))a"}"#, "invalid_token"),
        (#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 1, bytes: 31))"}"#, "invalid_token"),
        (#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 1, bytes: 201))"}"#, "invalid_token"),
        (#"{"identity":"bob","type":"fcm","token":""}"#, "invalid_token"),
        (#"{"identity":"bob","type":"fcm","token":"has space"}"#, "invalid_token"),
        (#"{"identity":"bob","type":"fcm","token":"\#(String(repeating: "x", count: 4097))"}"#, "invalid_token"),
        (#"{"identity":"bob","type":"fcm","token":"t","environment":"sandbox"}"#, "invalid_field"),
        (#"{"identity":"bob","type":"apns_voip","token":"\#(apnsToken(seed: 1))","environment":"staging"}"#, "invalid_field"),
        (#"{"identity":"bob","type":"sms","token":"t"}"#, "invalid_field"),
        (#"{"identity":"","type":"fcm","token":"t"}"#, "invalid_field"),
        (#"{"identity":"\#(String(repeating: "i", count: 257))","type":"fcm","token":"t"}"#, "invalid_field"),
        (#"{"identity":"bob","type":"fcm","token":"t","publicKey":"bm90IGEga2V5"}"#, "invalid_field"),
        // 65 bytes starting 0x04, but (1, 1) is not a point on P-256.
        (#"{"identity":"bob","type":"fcm","token":"t","publicKey":"BAEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="}"#, "invalid_field"),
        (#"{"identity":"bob","type":"fcm","token":"t","enviroment":"production"}"#, "unknown_field"),
        (#"{"identity":"bob","type":"fcm"}"#, "missing_field"),
        (#"{"identity":"bob","type":"fcm","token":7}"#, "invalid_field"),
        (#"{"type":"fcm","token":"t"}"#, "missing_field"),
        (#"["identity"]"#, "invalid_body"),
    ])
    func invalidBindingsAreRejectedWith422(body: String, code: String) async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let response = try await client.send(.post, "/v1/bindings", token: key, json: body)
            #expect(response.status == .unprocessableContent)
            #expect(response.errorCode == code)
            #expect(try await client.send(.get, "/v1/bindings", token: key).decode(BindingList.self).data.isEmpty)
        }
    }

    @Test func boundaryTokensAreAccepted() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            _ = try await client.createBinding(#"{"identity":"b","type":"apns_voip","token":"\#(apnsToken(seed: 1, bytes: 32))"}"#, token: key)
            _ = try await client.createBinding(#"{"identity":"b","type":"apns_voip","token":"\#(apnsToken(seed: 1, bytes: 200))"}"#, token: key)
            _ = try await client.createBinding(#"{"identity":"b","type":"fcm","token":"\#(String(repeating: "x", count: 4096))"}"#, token: key)
            let identity = String(repeating: "i", count: 256)
            _ = try await client.createBinding(#"{"identity":"\#(identity)","type":"fcm","token":"y"}"#, token: key)
        }
    }
}

/// Fair share for bindings (issue 42): an identity and an account have at most so many, and
/// registrations spend a budget, alone or in a batch, with a key or a device token.
@Suite struct BindingLimitsTests {
    @Test func anIdentityPastItsLimitIsRefusedAloneAndInABatch() async throws {
        var configured = try await TestServer.make()
        configured.configuration.maxBindingsPerIdentity = 2
        let server = configured
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            _ = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"b1"}"#, token: key)
            _ = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"b2"}"#, token: key)
            let refused = try await client.send(.post, "/v1/bindings", token: key, json: #"{"identity":"bob","type":"fcm","token":"b3"}"#)
            #expect(refused.status == .conflict)
            #expect(refused.errorCode == "too_many_bindings")
            // Registering one it has again is not a new one.
            _ = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"b1"}"#, token: key, expect: .ok)
            // A device token registering for its own identity is held to it too.
            let device = try await client.accessToken(identity: "bob", deviceID: "phone", key: key)
            let own = try await client.send(.post, "/v1/bindings", token: device, json: #"{"type":"fcm","token":"b4"}"#)
            #expect(own.status == .conflict)
            #expect(own.errorCode == "too_many_bindings")
            // In a batch, each item on its own: carol's two go in, her third and bob's are refused.
            let body = #"{"upsert":[{"identity":"carol","type":"fcm","token":"c1"},{"identity":"carol","type":"fcm","token":"c2"},{"identity":"carol","type":"fcm","token":"c3"},{"identity":"bob","type":"fcm","token":"b5"}]}"#
            let batch = try await client.send(.post, "/v1/bindings/batch", token: key, json: body).decode(BindingBatchResponse.self)
            #expect(batch.upsert.map(\.status) == [201, 201, 409, 409])
            #expect(batch.upsert[2].error?.code == "too_many_bindings")
            let listed = try await client.send(.get, "/v1/bindings?identity=bob", token: key).decode(BindingList.self)
            #expect(listed.data.map(\.token).sorted() == ["b1", "b2"])
        }
    }

    @Test func anAccountPastItsLimitRegistersOnlyTokensItHas() async throws {
        var configured = try await TestServer.make()
        configured.configuration.maxBindingsPerAccount = 3
        let server = configured
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            for index in 1...3 { _ = try await client.createBinding(#"{"identity":"user-\#(index)","type":"fcm","token":"t\#(index)"}"#, token: key) }
            let refused = try await client.send(.post, "/v1/bindings", token: key, json: #"{"identity":"user-4","type":"fcm","token":"t4"}"#)
            #expect(refused.status == .conflict)
            #expect(refused.errorCode == "too_many_bindings")
            #expect(refused.errorMessage?.contains("account") == true)
            // A token the account has moves to another identity, full or not.
            _ = try await client.createBinding(#"{"identity":"user-4","type":"fcm","token":"t1"}"#, token: key, expect: .ok)
            // Another account is not held to this one's count.
            let other = try await client.createAccount("globex", admin: server.adminToken).apiKey
            _ = try await client.createBinding(#"{"identity":"user-1","type":"fcm","token":"t1"}"#, token: other)
        }
    }

    @Test func registrationsSpendTheAccountsBudgetEachItemOfABatchToo() async throws {
        var configured = try await TestServer.make()
        configured.configuration.rateLimit = 1
        configured.configuration.rateLimitBurst = 2
        let server = configured
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            // The account's burst holds one full batch: 500 items, then nothing.
            let items = (0..<501).map { #"{"identity":"user-\#($0)","type":"fcm","token":"t\#($0)"}"# }
            let batch = try await client.send(.post, "/v1/bindings/batch", token: key, json: #"{"upsert":[\#(items.prefix(500).joined(separator: ","))]}"#)
                .decode(BindingBatchResponse.self)
            #expect(batch.upsert.allSatisfy { $0.status == 201 })
            let limited = try await client.send(.post, "/v1/bindings", token: key, json: items[500])
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] != nil)
            // A batch with the budget spent is refused whole, before its body is read.
            let batchLimited = try await client.send(.post, "/v1/bindings/batch", token: key, json: #"{"upsert":[\#(items[500])]}"#)
            #expect(batchLimited.status == .tooManyRequests)
            #expect(batchLimited.errorCode == "rate_limited")
            // A device spends its identity's budget (a tenth: a burst of 1), not the account's.
            let device = try await client.accessToken(identity: "dave", deviceID: "d1", key: key)
            _ = try await client.createBinding(#"{"type":"fcm","token":"d1"}"#, token: device)
            let deviceLimited = try await client.send(.post, "/v1/bindings", token: device, json: #"{"type":"fcm","token":"d2"}"#)
            #expect(deviceLimited.status == .tooManyRequests)
            server.clock.advance(by: 10)
            _ = try await client.createBinding(#"{"identity":"user-500","type":"fcm","token":"t500"}"#, token: key)
        }
    }
}
