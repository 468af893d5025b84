import Foundation
import RingRelayCore
import Testing
import RingRelayWire

/// Ring planning as a pure function: who is rung now, who waits for a live ack, who is left out.
@Suite struct RingPlanTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static let call = Call(
        id: "call_1", accountID: "acc_1", source: .native, caller: "alice", callee: "bob", state: .ringing, externalID: nil,
        createdAt: now, ringDeadline: now.addingTimeInterval(45), updatedAt: now)

    static let everything = RingPlan.Content(apnsVoIP: true, fcm: true)

    static func binding(_ id: String, _ type: BindingType = .apnsVoIP, device: String? = nil, status: BindingStatus = .active) -> Binding {
        Binding(
            id: id, accountID: "acc_1", identity: "bob", type: type, token: "token-\(id)", environment: nil, deviceID: device,
            publicKey: nil, status: status, invalidReason: nil, invalidatedAt: nil, registeredAt: now, createdAt: now, updatedAt: now)
    }

    func plan(live: [String] = [], _ bindings: [Binding], content: RingPlan.Content = everything) -> RingPlan {
        RingPlan.make(call: Self.call, liveDevices: live, bindings: bindings, content: content, now: Self.now)
    }

    @Test func connectedDevicesAreRungLiveAndTheirBindingsWait() {
        let plan = plan(
            live: ["phone", "tablet"],
            [Self.binding("bnd_phone", device: "phone"), Self.binding("bnd_watch", .fcm, device: "watch"), Self.binding("bnd_any")])
        #expect(plan.live.map(\.deviceID) == ["phone", "tablet"])
        #expect(plan.live.allSatisfy { $0.delivery.channel == .websocket && $0.delivery.kind == "event" && $0.delivery.bindingID == nil })
        #expect(plan.live.map(\.delivery.deviceID) == ["phone", "tablet"])
        // A device without a connection, and a binding without a device, are pushed at once.
        #expect(plan.pushes.map(\.binding.id) == ["bnd_watch", "bnd_any"])
        #expect(plan.fallbacks == ["phone": [Self.binding("bnd_phone", device: "phone")]])
        #expect(plan.count == 4)
        #expect(plan.deliveries.map(\.deviceID) == ["phone", "tablet", "watch", nil])
        #expect(plan.deliveries.allSatisfy { $0.callID == "call_1" && $0.outcome == Delivery.pending && $0.createdAt == Self.now })
        #expect(Set(plan.deliveries.map(\.id)).count == 4)
        #expect(plan.deliveries.allSatisfy { ResourceID.isValid($0.id, prefix: ResourceID.delivery) })
    }

    @Test func eachPushTakesItsBindingsChannelAndKind() {
        let plan = plan(
            [Self.binding("bnd_voip"), Self.binding("bnd_alert", .apnsAlert), Self.binding("bnd_fcm", .fcm)],
            content: RingPlan.Content(sealedBindingIDs: ["bnd_voip", "bnd_alert", "bnd_fcm"]))
        #expect(plan.pushes.map { "\($0.delivery.channel.rawValue)/\($0.delivery.kind)" } == ["apns/voip", "apns/alert", "fcm/data"])
        #expect(plan.pushes.map(\.delivery.bindingID) == ["bnd_voip", "bnd_alert", "bnd_fcm"])
    }

    @Test func inactiveBindingsAreLeftOut() {
        let plan = plan(
            live: ["phone"],
            [Self.binding("bnd_dead", status: .invalid), Self.binding("bnd_dead_fallback", device: "phone", status: .invalid)])
        #expect(plan.pushes.isEmpty)
        #expect(plan.fallbacks.isEmpty)
        #expect(plan.live.count == 1)
        let fallback = RingPlan.pushes(
            to: [Self.binding("bnd_a", device: "phone"), Self.binding("bnd_b", device: "phone", status: .invalid)], call: Self.call,
            now: Self.now)
        #expect(fallback.map(\.binding.id) == ["bnd_a"])
        #expect(fallback.first?.delivery.deviceID == "phone")
    }

    @Test func bindingsWithoutContentAreLeftOut() {
        // A provider call: no sealed invites, so alert bindings are not rung; here no FCM data either.
        let content = RingPlan.Content(apnsVoIP: true)
        let plan = plan(
            live: ["phone"],
            [Self.binding("bnd_voip"), Self.binding("bnd_alert", .apnsAlert), Self.binding("bnd_fcm", .fcm, device: "phone")],
            content: content)
        #expect(plan.pushes.map(\.binding.id) == ["bnd_voip"])
        #expect(plan.fallbacks.isEmpty)
        // A plain call has nothing for alert bindings.
        #expect(!Self.everything.covers(Self.binding("bnd_alert", .apnsAlert)))
    }

    @Test func aSealedCallRingsOnlyItsBoxedBindingsAndTheDevicesTheyName() {
        let sealed = RingPlan.Content(apnsVoIP: true, fcm: true, sealedBindingIDs: ["bnd_alert", "bnd_phone_voip", "bnd_anon"])
        #expect(sealed.covers(Self.binding("bnd_alert", .apnsAlert)))
        #expect(!sealed.covers(Self.binding("bnd_other", .apnsAlert)))
        #expect(!sealed.covers(Self.binding("bnd_voip")))
        let plan = plan(
            live: ["phone", "tablet", "laptop"],
            [
                Self.binding("bnd_phone_voip", device: "phone"), Self.binding("bnd_phone_fcm", .fcm, device: "phone"),
                Self.binding("bnd_tablet", .fcm, device: "tablet"), Self.binding("bnd_alert", .apnsAlert, device: "watch"),
                Self.binding("bnd_anon"),
            ],
            content: sealed)
        // The tablet's binding has no box and the laptop has none at all: neither rings live.
        #expect(plan.live.map(\.deviceID) == ["phone"])
        #expect(plan.fallbacks == ["phone": [Self.binding("bnd_phone_voip", device: "phone")]])
        #expect(plan.pushes.map(\.binding.id) == ["bnd_alert", "bnd_anon"])
    }

    /// A `live` binding is never pushed, nor held as a fallback: it only lets its device ring
    /// live, with its box on a sealed call.
    @Test func aLiveBindingIsNeverPushed() {
        let live = Self.binding("bnd_term", .live, device: "terminal")
        for content in [Self.everything, RingPlan.Content(sealedBindingIDs: ["bnd_term"])] {
            #expect(!content.covers(live))
            let connected = plan(live: ["terminal"], [live], content: content)
            #expect(connected.live.map(\.deviceID) == ["terminal"])
            #expect(connected.pushes.isEmpty && connected.fallbacks.isEmpty)
            // Away, nothing can ring it.
            #expect(plan([live], content: content).isEmpty)
        }
        #expect(plan(live: ["terminal"], [live], content: RingPlan.Content(sealedBindingIDs: [])).isEmpty)
    }

    @Test func noTargetsIsAnEmptyPlan() {
        let empty = plan([])
        #expect(empty.isEmpty)
        #expect(empty.count == 0)
        #expect(empty.deliveries.isEmpty)
        #expect(plan([Self.binding("bnd_alert", .apnsAlert)]).isEmpty)
        #expect(plan(live: ["phone"], [Self.binding("bnd_voip", device: "phone")], content: RingPlan.Content(sealedBindingIDs: [])).isEmpty)
        #expect(plan([Self.binding("bnd_dead", status: .invalid)]).isEmpty)
        // A connected device alone is something to ring.
        #expect(!plan(live: ["phone"], []).isEmpty)
    }
}
