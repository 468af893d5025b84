import Foundation
import HTTPTypes
import HummingbirdTesting
import RingRelayTesting
import RingRelayWire
import Testing

/// The whole server ringing 5,000 `apns_voip` bindings through every kind of HTTP/2 peer and
/// intermediary a push meets (``InteropDoorKind``): nginx direct and behind its own TLS front,
/// HAProxy, nghttpx, h2o, and a proxy that re-chunks every byte at random. Each door gets two
/// rings; each is checked where it matters — at the sink, every push arrived exactly once, and in
/// the call's record, every delivery is `delivered`, in one attempt — within a bound.
@Suite(.serialized) struct PushDoorTests {
    static let devices = 5_000

    @Test(arguments: InteropDoorKind.allCases)
    func twoRingsOfFiveThousandReachTheSinkExactlyOnce(through kind: InteropDoorKind) async throws {
        let door = try await InteropDoor.start(kind)
        defer { door.stop() }
        let seed = door.seed.map { " (chaos seed \($0))" } ?? ""
        try await PushInteropTests.withServer(url: door.url, caFile: door.caFile) { client, key in
            try await Self.bind(Self.devices, client: client, key: key)
            for round in 1...2 {
                let started = ContinuousClock.now
                let record = try await Self.ring(client: client, key: key)
                let outcomes = Dictionary((record.deliveries ?? []).map { ($0.outcome, 1) }, uniquingKeysWith: +)
                #expect(outcomes == ["delivered": Self.devices], "\(kind) round \(round)\(seed): \(outcomes)")
                #expect(record.deliveries?.allSatisfy { $0.attempts == 1 } == true, "\(kind) round \(round)\(seed): a push was sent again")
                #expect(ContinuousClock.now - started < .seconds(30), "\(kind) round \(round)\(seed)")
                let processed = await door.processedRequests(atLeast: round * Self.devices)
                #expect(processed.count == round * Self.devices, "\(kind) round \(round)\(seed): the sink processed \(processed.count)")
                #expect(Set(processed).count == processed.count, "\(kind) round \(round)\(seed): a push arrived twice")
            }
        }
    }

    @Test func everyConnectionCutMidRingLeavesThatRingWholeAndTheNextExact() async throws {
        // 50 ms into the ring every connection through the proxy is cut, both sides: pushes in
        // flight are lost, some with their answers (those may reach the sink twice). They go again on new connections within the ring;
        // the next ring is untouched.
        let door = try await InteropDoor.start(.chaos)
        defer { door.stop() }
        let seed = door.seed.map { " (chaos seed \($0))" } ?? ""
        try await PushInteropTests.withServer(url: door.url, caFile: door.caFile) { client, key in
            try await Self.bind(Self.devices, client: client, key: key)
            // 50 ms after the first push reached the sink, every connection is cut; how many
            // pushes had arrived by then says the cut fell inside the ring.
            let cut = Task { () -> (connections: Int, arrived: Int) in
                let deadline = ContinuousClock.now + .seconds(30)
                while door.loggedRequestCount() == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
                try await Task.sleep(for: .milliseconds(50))
                return (door.cutConnections(), door.loggedRequestCount())
            }
            let first = try await Self.ring(client: client, key: key)
            let (connections, arrivedBeforeCut) = try await cut.value
            #expect(connections > 0, "no connection was open to cut 50 ms into the ring")
            #expect(arrivedBeforeCut < Self.devices, "the ring was over before the cut (\(arrivedBeforeCut) pushes had arrived)")
            let outcomes = Dictionary((first.deliveries ?? []).map { ($0.outcome, 1) }, uniquingKeysWith: +)
            #expect(outcomes == ["delivered": Self.devices], "cut ring\(seed): \(outcomes)")
            let firstCount = Set(await door.processedRequests(atLeast: Self.devices).map { $0 }).count
            #expect(firstCount == Self.devices, "cut ring\(seed): \(firstCount) distinct pushes at the sink")
            let before = door.processedRequests().count

            let second = try await Self.ring(client: client, key: key)
            let again = Dictionary((second.deliveries ?? []).map { ($0.outcome, 1) }, uniquingKeysWith: +)
            #expect(again == ["delivered": Self.devices], "next ring\(seed): \(again)")
            #expect(second.deliveries?.allSatisfy { $0.attempts == 1 } == true, "next ring\(seed): a push was sent again")
            let processed = await door.processedRequests(atLeast: before + Self.devices)
            #expect(processed.count - before == Self.devices, "next ring\(seed): the sink processed \(processed.count - before)")
        }
    }

    /// `count` apns_voip bindings of `bob`, 500 a batch.
    static func bind(_ count: Int, client: any TestClientProtocol, key: String) async throws {
        for start in stride(from: 0, to: count, by: 500) {
            let items = (start..<min(start + 500, count)).map { index in
                #"{"identity":"bob","type":"apns_voip","token":"\#(String(format: "%08x", index) + String(repeating: "cd", count: 28))","environment":"production"}"#
            }
            let response = try await client.send(.post, "/v1/bindings/batch", token: key, json: #"{"upsert":[\#(items.joined(separator: ","))]}"#)
            #expect(response.status == .ok)
        }
    }

    /// Rings `bob` and waits (up to 45 s) until no delivery is pending; the call's record then.
    static func ring(client: any TestClientProtocol, key: String) async throws -> CallResource {
        let call = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#).decode(CallResource.self)
        var record = call
        let deadline = ContinuousClock.now + .seconds(45)
        while ContinuousClock.now < deadline {
            record = try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
            record.deliveries = try await deliveries(of: call.id, client: client, key: key)
            if record.deliveries?.count == devices, record.deliveries?.allSatisfy({ $0.outcome != "pending" }) == true { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        return record
    }

    /// Every delivery of a call, page by page.
    static func deliveries(of callID: String, client: any TestClientProtocol, key: String) async throws -> [DeliveryResource] {
        var all: [DeliveryResource] = []
        var cursor: String?
        repeat {
            let page = try await client.send(.get, "/v1/calls/\(callID)/deliveries" + (cursor.map { "?cursor=\($0)" } ?? ""), token: key)
                .decode(DeliveryList.self)
            all += page.data
            cursor = page.nextCursor
        } while cursor != nil
        return all
    }
}
