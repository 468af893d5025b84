import Foundation
import RingRelayWire

/// Who gets a "missed call" notice when a ring ends unanswered (cancelled by the caller, or timed
/// out), for calls that ask for it (``Call/notifyMissed``, or the account's ``CallDefaults``).
///
/// A notice is a regular notification, never a VoIP push: an alert push to `apns_alert` bindings, a
/// notification message to `fcm` bindings. It goes once to each of the callee's devices that never
/// acknowledged the ring over a live connection (a device that did showed the ring and heard its
/// end there), and never more than once per device: a device with several such bindings gets it on
/// the first. A binding without a `deviceId` counts as a device of its own.
///
/// Pure, like ``RingPlan``: the server executes the pushes.
public enum MissedCallNotices {
    /// The delivery kind of a notice, beside a ring's `voip`, `alert`, `data` and `event`.
    public static let kind = "missed_call"

    /// Whether a call in this state is one a notice is about: the caller gave up, or nobody answered.
    public static func applies(to call: Call) -> Bool {
        call.state == .cancelled || call.state == .missed
    }

    /// Plans the notices for an ended ring.
    ///
    /// - Parameters:
    ///   - call: the call whose ring ended unanswered for the callee (``applies(to:)``; in a ring
    ///     group, an identity's ring can end so while the call goes on).
    ///   - deliveries: its deliveries so far (the live ones tell which devices acknowledged the ring).
    ///   - bindings: the callee's bindings.
    ///   - now: the planning time (delivery ids and `createdAt`).
    /// - Returns: one push per device to notify.
    public static func plan(call: Call, deliveries: [Delivery], bindings: [Binding], now: Date) -> [RingPlan.Push] {
        var reached = Set(
            deliveries.lazy.filter { $0.channel == .websocket && $0.outcome == PushDisposition.delivered.metricName }.compactMap(\.deviceID))
        var pushes: [RingPlan.Push] = []
        for binding in bindings where binding.status == .active && (binding.type == .apnsAlert || binding.type == .fcm) {
            // `insert` both checks and claims the device: one notice per device.
            guard reached.insert(binding.deviceID ?? binding.id).inserted else { continue }
            let delivery = Delivery(
                id: ResourceID.make(ResourceID.delivery, at: now), callID: call.id, bindingID: binding.id, deviceID: binding.deviceID,
                channel: binding.type.channel, kind: kind, createdAt: now)
            pushes.append(RingPlan.Push(delivery: delivery, binding: binding))
        }
        return pushes
    }

    /// The notice's text. A sealed call's server knows nothing it may repeat, so its notice is
    /// neutral; otherwise it names the caller as the call did.
    public static func text(for call: Call) -> (title: String, body: String) {
        let title = "Missed call"
        guard !call.isSealed, let caller = call.callerName ?? call.caller, !caller.isEmpty else {
            return (title, "Open the app to see who called.")
        }
        return (title, "Missed call from \(caller)")
    }
}
