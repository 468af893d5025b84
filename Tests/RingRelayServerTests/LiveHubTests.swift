import Foundation
import RingRelayCore
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

@testable import RingRelayServer

/// The hub's bookkeeping, without sockets.
@Suite struct LiveHubTests {
    /// Alice's call to Bob in account `acc`, made at `now`, ringing 45 s.
    private static func call(at now: Date, state: CallState = .ringing) -> Call {
        Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: "acc", source: .native, caller: "alice", callee: "bob", state: state,
            externalID: nil, createdAt: now, ringDeadline: now.addingTimeInterval(45), updatedAt: now)
    }

    /// A device that acked its ring and went offline still gets the cancellation on reconnect,
    /// even when the hub tidied itself in between (it used to forget who had been rung once
    /// nothing of the call waited in an outbox; the live test saw it now and then).
    @Test func aPruneBetweenAckAndCancelKeepsTheDeviceInTheCall() throws {
        let clock = ManualWallClock(start: Date(timeIntervalSince1970: 1_790_000_000))
        let hub = LiveHub(clock: clock)
        let key = DeviceKey(accountID: "acc", identity: "bob", deviceID: "b1")
        let sink = LiveHub.Sink(send: { _ in }, close: { _, _ in })
        let now = clock.now
        var call = Self.call(at: now)

        let first = hub.connect(key, lastEventID: nil, sink: sink)
        let ring = try #require(hub.ring(.incoming, call: call, to: key, calleeBusy: false, provider: nil, rawPayload: nil).eventID)
        #expect(hub.ack(ring, from: key))
        hub.disconnect(first)
        hub.prune()

        call.state = .cancelled
        hub.publish([PlannedEvent(kind: .cancelled, identity: "bob", devices: .all, reason: "cancelled")], call: call)
        let again = hub.connect(key, lastEventID: ring, sink: sink)
        #expect(again.replayed == 1)
    }

    /// A ring whose task ran late (a loaded server) reaches the hub after the call was answered
    /// elsewhere: it is not sent, so no device hears `call.incoming` after its ending. The full
    /// suite saw exactly that once with a build beside it. The record goes after the ring deadline.
    @Test func aRingThatComesAfterTheCallsEndingIsNotSent() throws {
        let clock = ManualWallClock(start: Date(timeIntervalSince1970: 1_790_000_000))
        let hub = LiveHub(clock: clock)
        let (b1, b2) = (DeviceKey(accountID: "acc", identity: "bob", deviceID: "b1"), DeviceKey(accountID: "acc", identity: "bob", deviceID: "b2"))
        let toB1 = Mutex<[String]>([])
        let toB2 = Mutex<[String]>([])
        _ = hub.connect(b1, lastEventID: nil, sink: LiveHub.Sink(send: { text in toB1.withLock { $0.append(text) } }, close: { _, _ in }))
        _ = hub.connect(b2, lastEventID: nil, sink: LiveHub.Sink(send: { text in toB2.withLock { $0.append(text) } }, close: { _, _ in }))
        var call = Self.call(at: clock.now)
        let ringing = call
        #expect(hub.ring(.incoming, call: ringing, to: b2, calleeBusy: false, provider: nil, rawPayload: nil).eventID != nil)

        call.state = .accepted
        call.answeredBy = "b2"
        hub.publish([PlannedEvent(kind: .answeredElsewhere, identity: "bob", devices: .allExcept("b2"), reason: "answered")], call: call)
        #expect(hub.ring(.incoming, call: ringing, to: b1, calleeBusy: false, provider: nil, rawPayload: nil) == .ringOver)
        let b1Frames = toB1.withLock { $0 }.filter { $0.contains(call.id) }
        #expect(b1Frames.count == 1 && b1Frames[0].contains("call.answered_elsewhere"), "\(b1Frames)")
        #expect(toB2.withLock { $0 }.filter { $0.contains(call.id) }.count == 1)

        // Another call still rings; and past the ring deadline the record is pruned.
        #expect(hub.ring(.incoming, call: Self.call(at: clock.now), to: b1, calleeBusy: false, provider: nil, rawPayload: nil).eventID != nil)
        clock.advance(by: 45 + 61)
        hub.prune()
        #expect(hub.ring(.incoming, call: ringing, to: b1, calleeBusy: false, provider: nil, rawPayload: nil).eventID != nil)
    }

    /// In a ring group's call that rings on, only the devices whose part ended refuse a late ring.
    @Test func aRingGroupsLateRingIsRefusedOnlyWhereThePartEnded() throws {
        let clock = ManualWallClock(start: Date(timeIntervalSince1970: 1_790_000_000))
        let hub = LiveHub(clock: clock)
        let bob = DeviceKey(accountID: "acc", identity: "bob", deviceID: "b1")
        let carol = DeviceKey(accountID: "acc", identity: "carol", deviceID: "c1")
        let sink = LiveHub.Sink(send: { _ in }, close: { _, _ in })
        _ = hub.connect(bob, lastEventID: nil, sink: sink)
        _ = hub.connect(carol, lastEventID: nil, sink: sink)
        var call = Self.call(at: clock.now)
        call.group = RingGroup(mode: .all, members: ["bob", "carol"].map { CallParticipant(identity: $0) })
        let ringing = call
        call.group?.members[0].state = .declined
        hub.publish([PlannedEvent(kind: .declinedElsewhere, identity: "bob", devices: .all, reason: "declined")], call: call)
        #expect(hub.ring(.incoming, call: ringing, to: bob, calleeBusy: false, provider: nil, rawPayload: nil) == .ringOver)
        #expect(hub.ring(.incoming, call: ringing, to: carol, calleeBusy: false, provider: nil, rawPayload: nil).eventID != nil)
    }

    /// The calls whose devices the hub remembers are bounded: past the limit, those with the
    /// oldest last event are forgotten first, and the newest are kept.
    @Test func rememberedCallsAreBounded() throws {
        let clock = ManualWallClock(start: Date(timeIntervalSince1970: 1_790_000_000))
        let hub = LiveHub(clock: clock, callDeviceLimit: 10)
        let key = DeviceKey(accountID: "acc", identity: "bob", deviceID: "b1")
        _ = hub.connect(key, lastEventID: nil, sink: LiveHub.Sink(send: { _ in }, close: { _, _ in }))
        var ids: [String] = []
        for _ in 0..<25 {
            clock.advance(by: 1)
            let now = clock.now
            let call = Self.call(at: now)
            _ = try #require(hub.ring(.incoming, call: call, to: key, calleeBusy: false, provider: nil, rawPayload: nil).eventID)
            ids.append(call.id)
        }
        let remembered = ids.filter { hub.isConcerned(accountID: "acc", callID: $0, identities: []) }
        #expect(remembered.count <= 10)
        #expect(remembered.last == ids.last)
        #expect(!remembered.contains(ids[0]))
    }

    /// A call's change gives a device the same event id on every instance, and a hub that is
    /// handed the same change twice (from its own publish and another instance's notice) sends it
    /// once.
    @Test func aChangesEventHasOneIdEverywhereAndIsSentOnce() throws {
        let clock = ManualWallClock(start: Date(timeIntervalSince1970: 1_790_000_000))
        let key = DeviceKey(accountID: "acc", identity: "bob", deviceID: "b1")
        let now = clock.now
        var call = Self.call(at: now, state: .cancelled)
        call.version = 3
        let cancelled = [PlannedEvent(kind: .cancelled, identity: "bob", devices: .all, reason: "cancelled")]
        var texts: [[String]] = []
        for _ in 0..<2 {
            let hub = LiveHub(clock: clock)
            let sent = Mutex<[String]>([])
            _ = hub.connect(key, lastEventID: nil, sink: LiveHub.Sink(send: { text in sent.withLock { $0.append(text) } }, close: { _, _ in }))
            hub.publish(cancelled, call: call)
            hub.publish(cancelled, call: call, version: 3)
            texts.append(sent.withLock { $0 }.filter { $0.contains("call.cancelled") })
        }
        #expect(texts.map(\.count) == [1, 1])
        let ids = texts.compactMap { $0.first?.firstMatch(of: /"eventId":"(evt_[0-9a-f]+)"/)?.1 }.map(String.init)
        #expect(ids.count == 2 && ids[0] == ids[1])
        // Another change of the call (a newer version) is another event.
        #expect(LiveHub.eventID(callID: call.id, version: 4, planned: cancelled[0], deviceID: "b1") != ids.first)
    }

    /// A device another instance took over is no longer sent its calls' events here (the other
    /// instance sends them), until it connects here again.
    @Test func aDeviceThatMovedAwayIsLeftToItsNewInstance() throws {
        let clock = ManualWallClock(start: Date(timeIntervalSince1970: 1_790_000_000))
        let hub = LiveHub(clock: clock)
        let key = DeviceKey(accountID: "acc", identity: "bob", deviceID: "b1")
        let sink = LiveHub.Sink(send: { _ in }, close: { _, _ in })
        let now = clock.now
        var call = Self.call(at: now)
        let first = hub.connect(key, lastEventID: nil, sink: sink)
        let ring = try #require(hub.ring(.incoming, call: call, to: key, calleeBusy: false, provider: nil, rawPayload: nil).eventID)
        #expect(hub.ack(ring, from: key))
        hub.disconnect(first)
        hub.forget(key)

        call.state = .cancelled
        call.version = 1
        hub.publish([PlannedEvent(kind: .cancelled, identity: "bob", devices: .all, reason: "cancelled")], call: call)
        #expect(hub.connect(key, lastEventID: ring, sink: sink).replayed == 0)
    }
}
