import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import RingRelayCore
import RingRelayStore
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// `GET /v1/calls`: the call history, newest first, with its filters, its pages and its scoping.
/// Alice (a1), Bob (b1, b2) and Carol (c1) have live connections, so every native call rings.
@Suite struct CallHistoryTests {
    /// One call made for a test, as created, with the clock's time at its creation.
    struct Made {
        var id: String
        var createdAt: Date
    }

    /// The calls of ``withHistory(_:)``, in the order they were made.
    struct History {
        /// alice → bob: b1 answers, alice hangs up 5 s later (`ended`).
        var answered: Made
        /// carol → bob: b2 declines (`rejected`).
        var declined: Made
        /// alice → carol: alice gives up (`cancelled`).
        var cancelled: Made
        /// bob → alice: still ringing.
        var bobToAlice: Made
        /// Twilio rings bob, from `client:alice` (a provider call: alice is no identity of it).
        var twilio: Made
        /// carol → alice: still ringing, created in the same millisecond as `twilio`.
        var carolToAlice: Made
        /// alice → alice: still ringing, same millisecond again.
        var selfCall: Made

        var all: [Made] { [answered, declined, cancelled, bobToAlice, twilio, carolToAlice, selfCall] }
    }

    /// The ids of `calls` newest first, as the history orders them: by creation time, then by id.
    static func newestFirst(_ calls: [Made]) -> [String] {
        calls.sorted { ($0.createdAt, $0.id) > ($1.createdAt, $1.id) }.map(\.id)
    }

    /// A world with the calls of ``History``; the clock moves one second between calls, apart from
    /// the last three, which share their creation time.
    static func withHistory(_ body: @Sendable (LiveCallTests.World, History) async throws -> Void) async throws {
        try await LiveCallTests.withWorld(configure: {
            // The Twilio webhook is signed for the public host a proxy forwards.
            $0.trustProxy = true
            $0.liveFallback = .seconds(10)
        }) { world in
            let devices = [
                try await world.connect(world.alice), try await world.connect(world.bob1), try await world.connect(world.bob2),
                try await world.connect(world.carol),
            ]
            let clock = world.server.clock
            // Whole seconds from here on: the times the test sends back are exactly the stored ones.
            clock.advance(by: clock.now.timeIntervalSince1970.rounded(.up) - clock.now.timeIntervalSince1970)
            func made(_ call: CallResource, at date: Date) -> Made { Made(id: call.id, createdAt: date) }

            var at = clock.now
            let answered = made(try await world.call(), at: at)
            #expect(try await world.command("accept", answered.id, token: world.bob1).status == .ok)
            clock.advance(by: 5)
            #expect(try await world.command("end", answered.id, token: world.alice).status == .ok)

            clock.advance(by: 1)
            at = clock.now
            let declined = made(try await world.call(token: world.carol), at: at)
            #expect(try await world.command("reject", declined.id, token: world.bob2).status == .ok)

            clock.advance(by: 1)
            at = clock.now
            let cancelled = made(try await world.call(#"{"to":"carol"}"#), at: at)
            #expect(try await world.command("cancel", cancelled.id, token: world.alice).status == .ok)

            clock.advance(by: 1)
            at = clock.now
            let bobToAlice = made(try await world.call(#"{"to":"alice"}"#, token: world.bob1), at: at)

            clock.advance(by: 1)
            at = clock.now
            let accountID = try await WebhookTests.configureProviders(world.client, key: world.key, admin: world.server.adminToken)
            let rang = try await WebhookTests.postTwilio(
                world.client, accountID: accountID, body: WebhookTests.twilioBody(messageID: "WB-history"),
                extraHeaders: [HTTPField.Name("X-Forwarded-Host")!: WebhookTests.publicHost, HTTPField.Name("X-Forwarded-Proto")!: "http"],
                signedHost: WebhookTests.publicHost)
            #expect(rang.status == .ok, "\(String(buffer: rang.body))")
            let twilio = Made(id: try rang.decode(WebhookRingResponse.self).callId, createdAt: at)
            let carolToAlice = made(try await world.call(#"{"to":"alice"}"#, token: world.carol), at: at)
            let selfCall = made(try await world.call(#"{"to":"alice"}"#), at: at)

            let history = History(
                answered: answered, declined: declined, cancelled: cancelled, bobToAlice: bobToAlice, twilio: twilio,
                carolToAlice: carolToAlice, selfCall: selfCall)
            try await body(world, history)
            for device in devices { await device.close() }
        }
    }

    @Test func everyFilterPagesNewestFirstWithoutSkippingOrRepeating() async throws {
        try await Self.withHistory { world, calls in
            let all = calls.all
            func ids(_ query: String, token: String? = nil) async throws -> [String] {
                try await world.historyIDs(query, token: token ?? world.key, limit: 2)
            }
            // Pages of two, then pages of one through the three calls of one millisecond.
            #expect(try await ids("") == Self.newestFirst(all))
            #expect(try await world.historyIDs("", token: world.key, limit: 1) == Self.newestFirst(all))
            #expect(try await world.history("?limit=7").nextCursor == nil)
            #expect(try await world.history("?limit=6").nextCursor != nil)
            // Without a limit, a page holds up to 50.
            #expect(try await world.history().data.count == all.count)

            // An identity's calls: as callee (provider calls too) or as the caller of a native call.
            #expect(
                try await ids("?identity=bob")
                    == Self.newestFirst([calls.answered, calls.declined, calls.bobToAlice, calls.twilio]))
            #expect(try await ids("?identity=bob&direction=incoming") == Self.newestFirst([calls.answered, calls.declined, calls.twilio]))
            #expect(try await ids("?identity=bob&direction=outgoing") == [calls.bobToAlice.id])
            // 'client:alice' called through Twilio is not the identity alice; a call to oneself comes once.
            #expect(
                try await ids("?identity=alice")
                    == Self.newestFirst([calls.answered, calls.cancelled, calls.bobToAlice, calls.carolToAlice, calls.selfCall]))
            #expect(try await ids("?identity=alice&direction=outgoing") == Self.newestFirst([calls.answered, calls.cancelled, calls.selfCall]))
            #expect(try await ids("?identity=alice&direction=incoming") == Self.newestFirst([calls.bobToAlice, calls.carolToAlice, calls.selfCall]))
            #expect(try await ids("?identity=nobody").isEmpty)

            // Final states, one or several.
            #expect(try await ids("?state=ended") == [calls.answered.id])
            #expect(try await ids("?state=rejected,cancelled") == [calls.cancelled.id, calls.declined.id])
            #expect(try await ids("?identity=bob&state=ringing") == Self.newestFirst([calls.bobToAlice, calls.twilio]))
            #expect(
                try await ids("?identity=alice&direction=incoming&state=ringing,ended")
                    == Self.newestFirst([calls.bobToAlice, calls.carolToAlice, calls.selfCall]))

            // since is inclusive, until exclusive, at millisecond precision.
            let since = Self.time(calls.cancelled.createdAt)
            let until = Self.time(calls.twilio.createdAt)
            #expect(try await ids("?since=\(since)&until=\(until)") == [calls.bobToAlice.id, calls.cancelled.id])
            #expect(try await ids("?since=\(until)") == Self.newestFirst([calls.twilio, calls.carolToAlice, calls.selfCall]))
            #expect(try await ids("?until=\(since)") == [calls.declined.id, calls.answered.id])
            #expect(try await ids("?identity=alice&since=\(since)&until=\(until)&state=cancelled") == [calls.cancelled.id])
            // An offset is a time like any other (its '+' sent as %2B).
            let offset = Self.time(calls.cancelled.createdAt, timeZone: TimeZone(secondsFromGMT: 2 * 3600))
            #expect(offset.contains("+02:00"))
            #expect(try await ids("?until=\(offset.replacingOccurrences(of: "+", with: "%2B"))") == [calls.declined.id, calls.answered.id])

            // History items leave deliveries out; GET /v1/calls/{id} still has them.
            let page = try await world.history()
            #expect(page.data.allSatisfy { $0.deliveries == nil })
            let record = try await world.client.send(.get, "/v1/calls/\(calls.answered.id)", token: world.key).decode(CallResource.self)
            #expect(record.deliveries?.isEmpty == false)
        }
    }

    @Test func aDeviceSeesOnlyItsOwnIdentitysCalls() async throws {
        try await Self.withHistory { world, calls in
            // Bob's devices see Bob's calls, the provider call among them, and nothing else.
            let bobs = Self.newestFirst([calls.answered, calls.declined, calls.bobToAlice, calls.twilio])
            #expect(try await world.historyIDs("", token: world.bob1, limit: 2) == bobs)
            #expect(try await world.historyIDs("", token: world.bob2, limit: 3) == bobs)
            #expect(try await world.historyIDs("?identity=bob", token: world.bob1, limit: 2) == bobs)
            // The direction is relative to the token's own identity.
            #expect(try await world.historyIDs("?direction=outgoing", token: world.bob1, limit: 2) == [calls.bobToAlice.id])
            let carols = Self.newestFirst([calls.declined, calls.cancelled, calls.carolToAlice])
            #expect(try await world.historyIDs("", token: world.carol, limit: 2) == carols)

            // Naming another identity is refused, as for bindings.
            for query in ["?identity=alice", "?identity=alice&direction=incoming", "?identity=Bob"] {
                let refused = try await world.client.send(.get, "/v1/calls\(query)", token: world.bob1)
                #expect(refused.status == .forbidden, "\(query)")
                #expect(refused.errorCode == "forbidden", "\(query)")
            }
            // A cursor from another identity's listing leads only to the device's own calls.
            let alices = try await world.history("?identity=alice&limit=1")
            let cursor = try #require(alices.nextCursor)
            let continued = try await world.history("?cursor=\(cursor)", token: world.bob1)
            #expect(Set(continued.data.map(\.id)).isSubset(of: bobs))
            // No credentials, the admin token: as everywhere else.
            #expect(try await world.client.send(.get, "/v1/calls").status == .unauthorized)
            #expect(try await world.client.send(.get, "/v1/calls", token: world.server.adminToken).status == .forbidden)
        }
    }

    /// Who answered on which device, how long the conversation lasted and how it ended, in the
    /// history, the call's record and the live `call.ended` event (written by hand, not Codable).
    @Test func anAnsweredCallKeepsWhoAnsweredHowLongAndHowItEnded() async throws {
        try await LiveCallTests.withWorld(configure: { $0.liveFallback = .seconds(10) }) { world in
            let bob1 = try await world.connect(world.bob1)
            let call = try await world.call()
            #expect(try await bob1.nextEvent().type == .incoming)
            let accepted = try await world.command("accept", call.id, token: world.bob1).decode(CallResource.self)
            #expect(accepted.durationSeconds == nil, "an accepted call has no duration yet")
            #expect(try await bob1.nextEvent().type == .accepted)
            world.server.clock.advance(by: 83.4)
            #expect(try await world.command("end", call.id, token: world.alice).status == .ok)

            let ended = try await bob1.nextEvent()
            #expect(ended.type == .ended)
            #expect(ended.call.durationSeconds == 83)
            #expect(bob1.texts.last?.contains(#""durationSeconds":83,"#) == true)

            let record = try #require(try await world.history("?identity=bob").data.first)
            #expect(record.id == call.id)
            #expect(record.state == "ended")
            #expect(record.from == "alice")
            #expect(record.to == "bob")
            #expect(record.source == "native")
            #expect(record.answeredBy == "b1")
            #expect(record.endReason == "hangup")
            #expect(record.endedBy == "alice")
            #expect(record.durationSeconds == 83)
            let answeredAt = try #require(record.answeredAt)
            let endedAt = try #require(record.endedAt)
            #expect(endedAt.timeIntervalSince(answeredAt) >= 82)
            #expect(try await world.client.send(.get, "/v1/calls/\(call.id)", token: world.key).decode(CallResource.self).durationSeconds == 83)
            await bob1.close()
        }
    }

    /// A ring nobody answers is missed by the clock and the sweep, and stays in the history so.
    @Test func aMissedCallIsInTheHistory() async throws {
        try await LiveCallTests.withWorld { world in
            let bob1 = try await world.connect(world.bob1)
            let call = try await world.call(#"{"to":"bob","ringTimeoutSeconds":20}"#)
            #expect(try await bob1.nextEvent().type == .incoming)
            #expect(try await world.historyIDs("?state=missed", token: world.bob1, limit: 10).isEmpty)

            world.server.clock.advance(by: 21)
            #expect(try await bob1.nextEvent().type == .missed)
            let missed = try await world.history("?state=missed", token: world.bob1)
            #expect(missed.data.map(\.id) == [call.id])
            let record = try #require(missed.data.first)
            #expect(record.endReason == "unanswered")
            #expect(record.endedBy == nil)
            #expect(record.answeredBy == nil)
            #expect(record.answeredAt == nil)
            #expect(record.durationSeconds == nil)
            #expect(record.endedAt != nil)
            // The caller finds it among the calls it placed.
            #expect(try await world.historyIDs("?direction=outgoing&state=missed,rejected", token: world.alice, limit: 10) == [call.id])
            #expect(try await world.historyIDs("?direction=incoming&state=missed", token: world.alice, limit: 10).isEmpty)
            await bob1.close()
        }
    }

    @Test func badParametersAndTamperedCursorsAre422() async throws {
        try await LiveCallTests.withWorld { world in
            let bob1 = try await world.connect(world.bob1)
            for _ in 0..<3 {
                _ = try await world.call()
                world.server.clock.advance(by: 1)
            }
            let cursor = try #require(try await world.history("?limit=1").nextCursor)
            let binding = try await world.client.createBinding(#"{"identity":"bob","type":"fcm","token":"bob-token"}"#, token: world.key)
            // Cut short, lengthened, or pointing at a binding: not a position this server hands out.
            let forged = Cursor.encode("1790000000000:\(binding.id)")
            for (query, code) in [
                ("?limit=0", "invalid_parameter"), ("?limit=101", "invalid_parameter"), ("?limit=ten", "invalid_parameter"),
                ("?state=done", "invalid_parameter"), ("?state=ended,", "invalid_parameter"), ("?state=", "invalid_parameter"),
                ("?direction=sideways&identity=bob", "invalid_parameter"), ("?direction=incoming", "missing_parameter"),
                ("?identity=", "invalid_parameter"), ("?since=yesterday", "invalid_parameter"), ("?since=2026-05-01", "invalid_parameter"),
                ("?until=1790000000", "invalid_parameter"),
                ("?since=2026-05-02T00:00:00Z&until=2026-05-01T00:00:00Z", "invalid_parameter"),
                ("?since=2026-05-01T00:00:00Z&until=2026-05-01T00:00:00Z", "invalid_parameter"),
                ("?cursor=bogus", "invalid_cursor"), ("?cursor=\(cursor.dropLast(4))", "invalid_cursor"), ("?cursor=\(cursor)AA", "invalid_cursor"),
                ("?cursor=\(forged)", "invalid_cursor"), ("?cursor=\(Cursor.encode(binding.id))", "invalid_cursor"),
                ("?cursor=\(Cursor.encode("-5:call_00000000000000000000000000"))", "invalid_cursor"),
            ] {
                let response = try await world.client.send(.get, "/v1/calls\(query)", token: world.key)
                #expect(response.status == .unprocessableContent, "\(query)")
                #expect(response.errorCode == code, "\(query)")
            }
            // The untouched cursor still works.
            #expect(try await world.history("?limit=1&cursor=\(cursor)").data.count == 1)
            await bob1.close()
        }
    }

    /// Every shape of the history statements, and the history indexes each reads (both
    /// engines' plan tests).
    static let historyShapes: [(CallHistoryQuery, index: [String])] = {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let after = CallHistoryPosition(createdAt: now, id: ResourceID.make(ResourceID.call, at: now))
        return [
            (CallHistoryQuery(), ["calls_account_history"]),
            (CallHistoryQuery(states: [.missed, .ended], since: now.addingTimeInterval(-3600), until: now, after: after), ["calls_account_history"]),
            (CallHistoryQuery(states: [.accepted]), ["calls_account_history"]),
            (CallHistoryQuery(identity: "bob", direction: .incoming, states: [.accepted]), ["calls_callee_history", "call_members_history"]),
            (CallHistoryQuery(identity: "bob", direction: .outgoing, until: now, after: after), ["calls_caller_history"]),
            (CallHistoryQuery(identity: "bob", direction: .outgoing, states: [.missed]), ["calls_caller_history"]),
            (CallHistoryQuery(identity: "bob", since: now, after: after), ["calls_callee_history", "call_members_history", "calls_caller_history"]),
            (
                CallHistoryQuery(identity: "bob", states: [.ringing], since: now, after: after),
                ["calls_callee_history", "call_members_history", "calls_caller_history"]
            ),
        ]
    }()

    /// Every shape of the history statements reads one range of a history index, newest first,
    /// whatever the account's size: no table scan, and no sort but that of two page-sized parts.
    @Test func aPageReadsOneIndexRange() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await SQLiteStore.open(path: directory.appending("ringrelay.sqlite"), logger: TestLogging.logger("test"))
        for (query, indexes) in Self.historyShapes {
            let plans = try await store.callHistoryPlan(accountID: "acc_x", query: query)
            // With a state filter, one window statement per index comes before the page's.
            #expect(plans.count == (query.states.isEmpty ? 1 : indexes.count + 1), "\(query): \(plans)")
            for (number, plan) in plans.enumerated() {
                let isPage = number == plans.count - 1
                // A ring group's later identities lead from call_members to their calls, one by primary key each.
                #expect(!plan.contains { $0.hasPrefix("SCAN c") || $0.hasPrefix("SCAN m") }, "\(query): \(plan)")
                let reads = plan.filter { $0.hasPrefix("SEARCH") && !$0.contains("(id=?)") }
                let expected = isPage ? indexes : [indexes[number]]
                #expect(reads.count == expected.count, "\(query): \(plan)")
                for (read, index) in zip(reads, expected) {
                    #expect(read.hasPrefix("SEARCH ") && read.contains("INDEX \(index) (account_id=?"), "\(query): \(plan)")
                    #expect(
                        read.contains("(created_at,id)>(?,?) AND (created_at,id)<(?,?)")
                            || read.contains("(created_at,call_id)>(?,?) AND (created_at,call_id)<(?,?)"),
                        "\(query): the range bounds the read: \(plan)")
                }
                if expected.count == 1 {
                    #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(query): \(plan)")
                }
            }
        }
        try await store.close()
    }

    /// `time` as RFC 3339 with milliseconds, in UTC unless another zone is named.
    static func time(_ date: Date, timeZone: TimeZone? = nil) -> String {
        var style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        if let timeZone {
            style.timeZone = timeZone
            style = style.timeZoneSeparator(.colon)
        }
        return date.formatted(style)
    }
}

extension LiveCallTests.World {
    /// One page of `GET /v1/calls` (the account key by default); expects 200.
    func history(_ query: String = "", token: String? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws -> CallList {
        let response = try await client.send(.get, "/v1/calls\(query)", token: token ?? key)
        #expect(response.status == .ok, "\(query): \(String(buffer: response.body))", sourceLocation: sourceLocation)
        return try response.decode(CallList.self)
    }

    /// The ids of every page of `GET /v1/calls`, `limit` at a time, following `nextCursor`; no
    /// page may be empty or longer than `limit`.
    func historyIDs(_ query: String, token: String, limit: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String] {
        var ids: [String] = []
        var cursor: String?
        let base = (query.isEmpty ? "?" : query + "&") + "limit=\(limit)"
        repeat {
            let page = try await history(base + (cursor.map { "&cursor=\($0)" } ?? ""), token: token, sourceLocation: sourceLocation)
            #expect(page.data.count <= limit, sourceLocation: sourceLocation)
            #expect(!page.data.isEmpty || cursor == nil, "an empty page after a cursor", sourceLocation: sourceLocation)
            ids += page.data.map(\.id)
            cursor = page.nextCursor
        } while cursor != nil && ids.count < 1000
        #expect(Set(ids).count == ids.count, "a call came twice: \(ids)", sourceLocation: sourceLocation)
        return ids
    }
}

/// A ring of many devices is read in pages: its answer and `GET /v1/calls/{id}` carry the first
/// 500 deliveries and a cursor, `GET /v1/calls/{id}/deliveries` the rest (issue 42: one call's
/// record once answered 23.9 MB).
@Suite struct DeliveryPagesTests {
    @Test func aLargeRingsDeliveriesComeInPagesOfAtMost500() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            for batch in 0..<3 {
                let items = (0..<400).map { #"{"identity":"bob","type":"fcm","token":"t-\#(batch)-\#($0)"}"# }.joined(separator: ",")
                #expect(try await client.send(.post, "/v1/bindings/batch", token: key, json: #"{"upsert":[\#(items)]}"#).status == .ok)
            }
            let created = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#)
            #expect(created.status == .created)
            let call = try created.decode(CallResource.self)
            #expect(call.deliveries?.count == 500)
            #expect(call.deliveriesNextCursor != nil)
            // The answer's page and its cursor lead to the rest, each once.
            var fromAnswer = call.deliveries?.map(\.id) ?? []
            var next = call.deliveriesNextCursor
            while let cursor = next {
                let page = try await client.send(.get, "/v1/calls/\(call.id)/deliveries?cursor=\(cursor)", token: key).decode(DeliveryList.self)
                fromAnswer += page.data.map(\.id)
                next = page.nextCursor
            }
            #expect(fromAnswer.count == 1200)
            #expect(Set(fromAnswer).count == 1200)
            let read = try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
            #expect(read.deliveries?.count == 500)
            var ids = read.deliveries?.map(\.id) ?? []
            var cursor = read.deliveriesNextCursor
            var pages = 0
            while let next = cursor {
                let page = try await client.send(.get, "/v1/calls/\(call.id)/deliveries?cursor=\(next)", token: key).decode(DeliveryList.self)
                #expect(page.data.count <= 500)
                ids += page.data.map(\.id)
                cursor = page.nextCursor
                pages += 1
            }
            #expect(pages == 2)
            #expect(ids.count == 1200)
            #expect(Set(ids).count == 1200, "each delivery once")
            #expect(ids == ids.sorted(), "in planning order")
            // A page of 7, and the cursors are checked.
            let small = try await client.send(.get, "/v1/calls/\(call.id)/deliveries?limit=7", token: key).decode(DeliveryList.self)
            #expect(small.data.map(\.id) == Array(ids.prefix(7)))
            #expect(try await client.send(.get, "/v1/calls/\(call.id)/deliveries?cursor=bm9wZQ", token: key).errorCode == "invalid_cursor")
            #expect(try await client.send(.get, "/v1/calls/\(call.id)/deliveries?limit=501", token: key).errorCode == "invalid_parameter")
            // Someone who may not read the call gets the same 404 as for none.
            let mallory = try await client.accessToken(identity: "mallory", deviceID: "m1", key: key)
            #expect(try await client.send(.get, "/v1/calls/\(call.id)/deliveries", token: mallory).status == .notFound)
        }
    }
}
