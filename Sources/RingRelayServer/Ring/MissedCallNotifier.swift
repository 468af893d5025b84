import Foundation
import Logging
import RingRelayCore
import RingRelayFCM
import RingRelayWire

/// Sends "missed call" notices when a ring ends unanswered, for calls that ask for it (see
/// ``MissedCallNotices`` for who gets one).
///
/// ``CallService`` calls ``callEnded(_:)`` once per call: only the one conditional update that
/// moved the call to `cancelled` or `missed` does, so however many instances or commands race, a
/// device hears of a missed call once.
struct MissedCallNotifier: Sendable {
    let store: any DataStore
    let executor: RingExecutor
    let clock: any WallClock
    let logger: Logger

    /// How long the push services may hold a notice for a device that is offline: a missed call
    /// is worth telling about when the phone comes back on the next morning, not a week later.
    static let lifetime: Duration = .seconds(24 * 3600)
    /// How long a notice is retried when the push service is failing.
    static let attemptWindow: Duration = .seconds(120)

    /// Sends the notices for `call`, just ended; returns once they are started.
    func callEnded(_ call: Call) async {
        guard MissedCallNotices.applies(to: call) else { return }
        await ringEnded(for: [call.callee], of: call)
    }

    /// Sends the notices for the identities whose ring of `call` just ended unanswered (in a ring
    /// group, each identity's ring ends on its own); returns once they are started.
    func ringEnded(for identities: [String], of call: Call) async {
        guard !identities.isEmpty else { return }
        var logger = self.logger
        logger[metadataKey: "account.id"] = .string(call.accountID)
        logger[metadataKey: "call.id"] = .string(call.id)
        do {
            // The account's default is read only now: most calls are answered.
            let wanted: Bool
            if let notifyMissed = call.notifyMissed {
                wanted = notifyMissed
            } else {
                wanted = try await store.callDefaults(accountID: call.accountID).notifyMissed
            }
            guard wanted else { return }
            let now = clock.now
            let deliveries = try await store.deliveries(callID: call.id)
            var pushes: [RingPlan.Push] = []
            for identity in identities {
                pushes += MissedCallNotices.plan(
                    call: call, deliveries: deliveries,
                    bindings: try await store.activeBindings(accountID: call.accountID, identity: identity), now: now)
            }
            guard !pushes.isEmpty else { return }
            let payloads = Self.payloads(for: call, expiresAt: now.addingTimeInterval(Self.lifetime.timeInterval))
            logger.info("missed call; notifying", metadata: ["notice.count": .stringConvertible(pushes.count)])
            executor.send(
                pushes.map { ($0, $0.binding.type == .fcm ? payloads.fcm : payloads.apns) },
                deadline: now.addingTimeInterval(Self.attemptWindow.timeInterval), logger: logger)
        } catch {
            logger.warning("could not send missed-call notices", metadata: ["error.cause": .string("\(error)")])
        }
    }

    /// The notice in each channel's form. Both carry the call id and how it ended for the app (a
    /// Notification Service Extension may rewrite the text), and the call id as the collapse key,
    /// so a notice replaces an earlier one about the same call.
    static func payloads(for call: Call, expiresAt: Date) -> (apns: BindingPusher.Payload, fcm: BindingPusher.Payload) {
        let text = MissedCallNotices.text(for: call)
        let reason = call.state == .cancelled ? "cancelled" : "unanswered"
        let ringrelay = JSONValue.object([
            "type": .string(CallEventType.missed.rawValue), "callId": .string(call.id), "reason": .string(reason),
        ]).jsonText
        let aps = JSONValue.object([
            "alert": .object(["title": .string(text.title), "body": .string(text.body)]),
            "thread-id": .string("ringrelay.missed-calls"), "mutable-content": .number(1),
        ]).jsonText
        let apns = BindingPusher.Payload.apns(
            .init(body: Array(#"{"aps":\#(aps),"ringrelay":\#(ringrelay)}"#.utf8), collapseID: call.id, expiresAt: expiresAt))
        let fcm = BindingPusher.Payload.fcm(
            .init(
                data: [NativeInvite.payloadKey: ringrelay], notice: .init(title: text.title, body: text.body, tag: call.id),
                expiresAt: expiresAt))
        return (apns, fcm)
    }
}
