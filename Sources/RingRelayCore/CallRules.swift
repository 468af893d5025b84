import Foundation
import RingRelayWire

/// A command a participant sends about a call.
public enum CallCommand: String, Sendable, Hashable, CaseIterable {
    /// A callee device answers.
    case accept
    /// A callee device declines.
    case reject
    /// The caller gives up before an answer.
    case cancel
    /// Either side hangs up an accepted call.
    case end
}

/// Who sends a command: a device (identity and device id from its access token), or the
/// account's backend acting for one (`identity` is `nil`; `deviceID` optional).
public struct CallActor: Sendable, Hashable {
    /// The device's identity; `nil` for the account's API key.
    public var identity: String?
    /// The device.
    public var deviceID: String?

    /// Creates an actor.
    public init(identity: String?, deviceID: String?) {
        self.identity = identity
        self.deviceID = deviceID
    }
}

/// Which of an identity's connected devices get an event.
public enum DeviceSelection: Sendable, Hashable, Codable {
    /// Every device.
    case all
    /// Only this device.
    case only(String)
    /// Every device but this one.
    case allExcept(String)

    /// Whether `deviceID` is selected.
    public func includes(_ deviceID: String) -> Bool {
        switch self {
        case .all: true
        case .only(let only): deviceID == only
        case .allExcept(let except): deviceID != except
        }
    }
}

/// One event to send after a state change.
public struct PlannedEvent: Sendable, Hashable, Codable {
    /// What to send.
    public var kind: CallEventType
    /// To whose devices.
    public var identity: String
    /// Which of them.
    public var devices: DeviceSelection
    /// The reason carried by end events (`answered_elsewhere`, `unanswered`, …).
    public var reason: String?
    /// For a ring group's events to the caller: the identity the event is about.
    public var participant: String?

    /// Creates a planned event.
    public init(kind: CallEventType, identity: String, devices: DeviceSelection, reason: String?, participant: String? = nil) {
        self.kind = kind
        self.identity = identity
        self.devices = devices
        self.reason = reason
        self.participant = participant
    }
}

/// A conditional state change for ``CallStore/transitionCall(_:)``.
public struct CallChange: Sendable, Hashable {
    /// The call.
    public var id: String
    /// Its account.
    public var accountID: String
    /// The states the call must be in for the change to apply.
    public var from: Set<CallState>
    /// The new state.
    public var to: CallState
    /// When.
    public var at: Date
    /// Apply only while `at` is before the ring deadline (accept, reject, cancel).
    public var beforeDeadline: Bool
    /// For accept: the device that answered.
    public var answeredBy: String?
    /// For a final state: why.
    public var endReason: CallEndReason?
    /// For a final state reached by a command: whose.
    public var endedBy: String?

    /// Creates a change.
    public init(
        id: String, accountID: String, from: Set<CallState>, to: CallState, at: Date, beforeDeadline: Bool, answeredBy: String? = nil,
        endReason: CallEndReason? = nil, endedBy: String? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.from = from
        self.to = to
        self.at = at
        self.beforeDeadline = beforeDeadline
        self.answeredBy = answeredBy
        self.endReason = endReason
        self.endedBy = endedBy
    }
}

/// The call rules: who may do what in which state, and who hears about it (see "Calls and live
/// connections" in docs/ARCHITECTURE.md).
///
/// Pure functions; the server applies the ``CallChange`` as one conditional store update and sends
/// the ``PlannedEvent``s over live connections.
public enum CallRules {
    /// Checks that `actor` may send `command` for `call` and returns the change to apply.
    ///
    /// - Throws: `call_not_found` (404) when a device of another identity asks (it may not learn the
    ///   call exists), `forbidden` (403) when a participant lacks the role, `call_not_ringing` /
    ///   `call_not_active` (409) when the call's state does not allow the command.
    public static func change(for command: CallCommand, on call: Call, by actor: CallActor, at now: Date) throws(RingRelayError) -> CallChange {
        if let identity = actor.identity, !call.isParticipant(identity) {
            throw RingRelayError.notFound("call", id: call.id)
        }
        let isCallee = actor.identity.map { $0 == call.callee } ?? true
        let isCaller = actor.identity.map { $0 == call.callerIdentity } ?? true
        switch command {
        case .accept, .reject:
            guard isCallee else { throw .forbidden("Only the callee's devices may \(command.rawValue) a call.") }
        case .cancel:
            guard call.source == .native else {
                throw .init(.conflict, code: .callNotCancellable, "A \(call.source.rawValue) call is cancelled by its provider, not through RingRelay.")
            }
            guard isCaller else { throw .forbidden("Only the caller may cancel a call.") }
        case .end:
            break
        }
        let required: CallState = command == .end ? .accepted : .ringing
        // A ring whose time is up is as good as missed, even before the sweeper has marked it.
        let expired = call.state == .ringing && now >= call.ringDeadline
        guard call.state == required, !(required == .ringing && expired) else {
            throw conflict(command, state: expired ? .missed : call.state, callID: call.id)
        }
        switch command {
        case .accept:
            return CallChange(
                id: call.id, accountID: call.accountID, from: [.ringing], to: .accepted, at: now, beforeDeadline: true,
                answeredBy: actor.deviceID)
        case .reject:
            return CallChange(
                id: call.id, accountID: call.accountID, from: [.ringing], to: .rejected, at: now, beforeDeadline: true, endReason: .declined,
                endedBy: actor.identity ?? call.callee)
        case .cancel:
            return CallChange(
                id: call.id, accountID: call.accountID, from: [.ringing], to: .cancelled, at: now, beforeDeadline: true, endReason: .cancelled,
                endedBy: actor.identity ?? call.caller)
        case .end:
            return CallChange(
                id: call.id, accountID: call.accountID, from: [.accepted], to: .ended, at: now, beforeDeadline: false, endReason: .hangup,
                endedBy: actor.identity)
        }
    }

    /// The change that refuses a new call whose callee is busy (`ifBusy: reject`), before it rings.
    public static func busy(_ call: Call, at now: Date) -> CallChange {
        CallChange(id: call.id, accountID: call.accountID, from: [.ringing], to: .rejected, at: now, beforeDeadline: false, endReason: .busy)
    }

    /// What a ring to one identity that ran out of time becomes (``timeout(_:at:)``; the stores'
    /// ``CallStore/endUnansweredCalls(at:limit:)`` applies it to many calls at once).
    public static let unansweredEnd: (state: CallState, reason: CallEndReason) = (.missed, .unanswered)

    /// The change that ends an unanswered ring.
    public static func timeout(_ call: Call, at now: Date) -> CallChange {
        CallChange(
            id: call.id, accountID: call.accountID, from: [.ringing], to: unansweredEnd.state, at: now, beforeDeadline: false,
            endReason: unansweredEnd.reason)
    }

    /// The 409 for a command the call's state no longer allows.
    public static func conflict(_ command: CallCommand, state: CallState, callID: String) -> RingRelayError {
        let needs = command == .end ? "an accepted call" : "a ringing call"
        var error = RingRelayError(
            .conflict, code: command == .end ? RingRelayError.Code.callNotActive : .callNotRinging,
            "Call '\(ClientText.echo(callID))' is \(state.rawValue); \(command.rawValue) needs \(needs).")
        error.state = state.rawValue
        return error
    }

    /// The events a change sends, given the call after it and the device that acted.
    public static func events(after call: Call, actingDevice: String?) -> [PlannedEvent] {
        let caller = call.callerIdentity
        var events: [PlannedEvent] = []
        func toCallee(_ kind: CallEventType, others: CallEventType, reason: String?, othersReason: String?) {
            if let actingDevice {
                events.append(PlannedEvent(kind: kind, identity: call.callee, devices: .only(actingDevice), reason: reason))
                events.append(PlannedEvent(kind: others, identity: call.callee, devices: .allExcept(actingDevice), reason: othersReason))
            } else {
                events.append(PlannedEvent(kind: others, identity: call.callee, devices: .all, reason: othersReason))
            }
        }
        func toCaller(_ kind: CallEventType, reason: String?) {
            // Calling yourself: the callee events already reach those devices.
            if let caller, caller != call.callee {
                events.append(PlannedEvent(kind: kind, identity: caller, devices: .all, reason: reason))
            }
        }
        switch call.state {
        case .accepted:
            toCallee(.accepted, others: .answeredElsewhere, reason: nil, othersReason: "answered_elsewhere")
            toCaller(.accepted, reason: nil)
        case .rejected where call.endReason == .busy:
            // Refused for a busy callee before anything rang: only the caller hears of it.
            toCaller(.rejected, reason: "busy")
        case .rejected:
            toCallee(.rejected, others: .declinedElsewhere, reason: "declined", othersReason: "declined_elsewhere")
            toCaller(.rejected, reason: "declined")
        case .cancelled:
            events.append(PlannedEvent(kind: .cancelled, identity: call.callee, devices: .all, reason: "cancelled"))
            toCaller(.cancelled, reason: "cancelled")
        case .missed:
            events.append(PlannedEvent(kind: .missed, identity: call.callee, devices: .all, reason: "unanswered"))
            toCaller(.ended, reason: "unanswered")
        case .ended:
            // Only the devices in the call: the callee's other devices were told
            // `call.answered_elsewhere` when it was accepted, and hear nothing more of it.
            if let answeredBy = call.answeredBy {
                events.append(PlannedEvent(kind: .ended, identity: call.callee, devices: .only(answeredBy), reason: "hangup"))
            }
            toCaller(.ended, reason: "hangup")
        case .ringing, .unreachable:
            break
        }
        return events
    }
}
