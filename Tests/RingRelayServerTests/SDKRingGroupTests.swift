import Foundation
import RingRelayKit
import RingRelayWire
import Synchronization
import Testing

/// Ring groups through RingRelayKit against a live server: the caller's SDK follows each callee,
/// the callees' SDKs end their rings as the group's rules say.
@Suite struct SDKRingGroupTests {
    /// The participant changes an observer heard, as `identity state` lines.
    final class Heard: Sendable {
        private let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }

        func record(_ event: CallManager.Event) {
            guard case .participantsChanged(_, let changed) = event else { return }
            lines.withLock { $0 += changed.map { "\($0.identity) \($0.state.wireValue)" } }
        }
    }

    @Test func inModeAllEachCalleeJoinsAndTheLastOneOutEndsTheCallersCall() async throws {
        try await SDKLiveTests.withWorld { world in
            let alice = try await world.device("alice", "a1")
            let bob = try await world.device("bob", "b1")
            let carol = try await world.device("carol", "c1")
            let dave = try await world.device("dave", "d1")
            let heard = Heard()
            let observation = alice.client.calls.addObserver(heard.record)

            let outgoing = try await alice.client.startCall(to: ["bob", "carol", "dave"], mode: .all, displayName: "Alice")
            #expect(outgoing.ringMode == .all)
            #expect(outgoing.participants.map(\.state) == [.ringing, .ringing, .ringing])
            let toBob = try await bob.incomingCall(outgoing.uuid)
            let toCarol = try await carol.incomingCall(outgoing.uuid)
            let toDave = try await dave.incomingCall(outgoing.uuid)
            #expect(toCarol.ringMode == .all)
            #expect(toCarol.participants.map(\.identity) == ["bob", "carol", "dave"])

            try await toBob.answer()
            #expect(await eventually { outgoing.state == .connected && alice.ui.records.contains(.outgoingConnected(outgoing.uuid)) })
            // Carol and Dave ring on after Bob's answer, and answer or decline on their own.
            #expect(toCarol.state == .ringing)
            try await toCarol.answer()
            #expect(await eventually { outgoing.participants.map(\.state) == [.accepted, .accepted, .ringing] })
            try await toDave.reject()
            #expect(await eventually { outgoing.participants.last?.state == .declined })

            // Bob leaves: the call goes on for Alice and Carol. Carol leaves last: it is over.
            try await toBob.end()
            #expect(await eventually { outgoing.participants.first?.state == .left })
            #expect(outgoing.state == .connected)
            #expect(toCarol.state == .connected)
            try await toCarol.end()
            #expect(await eventually { outgoing.state == .ended(.remoteEnded) })
            #expect(alice.ui.records.filter { $0 == .outgoingConnected(outgoing.uuid) }.count == 1)
            #expect(await eventually { heard.all.count == 5 })
            #expect(heard.all == ["bob accepted", "carol accepted", "dave declined", "bob left", "carol left"])

            let entry = try await alice.client.recentCalls(limit: 1).data.first
            #expect(entry?.id == outgoing.serverCallId)
            #expect(entry?.ringMode == .all)
            #expect(entry?.ringGroup.map(\.state) == [.left, .left, .declined])
            #expect(entry?.ringGroup.first?.answeredBy == "b1")
            observation.cancel()
            for device in [alice, bob, carol, dave] { await device.client.disconnect() }
        }
    }

    @Test func inModeFirstTheFirstAnswerTakesTheCallAndEveryOtherDeviceStops() async throws {
        try await SDKLiveTests.withWorld { world in
            let alice = try await world.device("alice", "a1")
            let bob1 = try await world.device("bob", "b1")
            let bob2 = try await world.device("bob", "b2")
            let carol = try await world.device("carol", "c1")

            let outgoing = try await alice.client.startCall(to: ["bob", "carol"])
            #expect(outgoing.ringMode == .first)
            let toBob1 = try await bob1.incomingCall(outgoing.uuid)
            let toBob2 = try await bob2.incomingCall(outgoing.uuid)
            let toCarol = try await carol.incomingCall(outgoing.uuid)

            try await toCarol.answer()
            #expect(toCarol.state == .connected)
            // The SDK moves the call's state, then tells the system UI: wait for the reports themselves.
            #expect(await eventually { [bob1, bob2].allSatisfy { $0.ui.endReasons(for: outgoing.uuid) == [.answeredElsewhere] } })
            #expect(toBob1.state == .ended(.answeredElsewhere) && toBob2.state == .ended(.answeredElsewhere))
            #expect(await eventually { outgoing.state == .connected })
            #expect(await eventually { outgoing.participants.map(\.state) == [.answeredElsewhere, .accepted] })

            try await outgoing.end()
            #expect(await eventually { toCarol.state == .ended(.remoteEnded) })
            let record = try await alice.client.fetchCall(id: try #require(outgoing.serverCallId))
            #expect(record.state == "ended")
            #expect(record.answeredBy == "c1")
            for device in [alice, bob1, bob2, carol] { await device.client.disconnect() }
        }
    }
}
