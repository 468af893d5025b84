import Foundation
import RingRelayWire

/// A ring group's change: the call after it, what to tell whom, and whose ring it ended unanswered.
public struct GroupCallChange: Sendable, Hashable {
    /// The call after the change (same version: the store counts it up when it applies it).
    public var call: Call
    /// The events it sends.
    public var events: [PlannedEvent]
    /// The identities whose ring it ended without an answer (`missed` or `cancelled`): the ones a
    /// missed-call notice may go to.
    public var unanswered: [String]
}

/// The call rules of a ring group (a call to several identities at once; see ``RingMode``), as
/// ``CallRules`` has them for a call to one.
///
/// Each identity has its own part (``CallParticipant``); the call's ``Call/state`` sums them up:
/// `ringing` until an identity answers, `accepted` while anyone is in the call, and one final
/// state. Every device of every party hears exactly one ending: a callee's devices the end of its
/// own part (`call.answered_elsewhere`, `call.declined_elsewhere`, `call.rejected`, `call.missed`,
/// `call.cancelled`, or `call.ended` to the device in the call), the caller's devices the end of
/// the call. What happens to one identity while the call goes on reaches the caller as
/// `call.participant_updated`.
///
/// Pure: the server applies ``GroupCallChange/call`` with ``CallStore/updateCall(_:expectedVersion:)``
/// (computing again from the stored call when another change won) and sends the events.
public enum GroupCallRules {
    /// Checks that `actor` may send `command` for the ring group `call` and returns the change.
    ///
    /// - Throws: `call_not_found` (404) for a device of an identity the call does not involve,
    ///   `forbidden` (403) for the wrong role (in a ring group an accept or a reject comes from a
    ///   device of the identity answering, never the account's key), `call_not_ringing` /
    ///   `call_not_active` (409) when the call, or the identity's part of it, has moved on.
    public static func change(for command: CallCommand, on call: Call, by actor: CallActor, at now: Date) throws(RingRelayError) -> GroupCallChange {
        var draft = try Draft(call, at: now)
        let identity = actor.identity
        if let identity, !call.isParticipant(identity) { throw RingRelayError.notFound("call", id: call.id) }
        let isCaller = identity == nil || identity == call.callerIdentity
        switch command {
        case .accept, .reject:
            guard let identity, let member = draft.group.member(identity) else {
                throw .forbidden("In a ring group, only a device of an identity rung may \(command.rawValue) the call.")
            }
            let open: Set<CallState> = draft.group.mode == .first ? [.ringing] : [.ringing, .accepted]
            guard open.contains(call.state), now < call.ringDeadline else {
                throw CallRules.conflict(command, state: call.state == .ringing ? .missed : call.state, callID: call.id)
            }
            guard member.state == .ringing else { throw memberConflict(command, member: member, callID: call.id) }
            if command == .accept {
                draft.accept(identity, device: actor.deviceID)
            } else {
                draft.decline(identity, device: actor.deviceID)
            }
        case .cancel:
            guard isCaller else { throw .forbidden("Only the caller may cancel a call.") }
            guard call.state == .ringing, now < call.ringDeadline else {
                throw CallRules.conflict(command, state: call.state == .ringing ? .missed : call.state, callID: call.id)
            }
            draft.finish(.cancelled, reason: .cancelled, by: identity ?? call.caller, callerEvent: .cancelled, callerReason: "cancelled")
        case .end:
            guard call.state == .accepted else { throw CallRules.conflict(command, state: call.state, callID: call.id) }
            if isCaller {
                draft.finish(.ended, reason: .hangup, by: identity, callerEvent: .ended, callerReason: "hangup")
            } else if let identity, let member = draft.group.member(identity) {
                guard member.state == .accepted else { throw memberConflict(command, member: member, callID: call.id) }
                draft.leave(identity)
            }
        }
        return draft.result
    }

    /// The change at the ring timeout: every identity still ringing missed it. The call ends as
    /// `missed` when nobody answered; otherwise it goes on for those in it. `nil` when nothing
    /// rings any more.
    public static func timeout(_ call: Call, at now: Date) -> GroupCallChange? {
        guard call.isLive, var draft = try? Draft(call, at: now), draft.group.anyRinging else { return nil }
        if call.state == .ringing {
            draft.finish(.missed, reason: .unanswered, by: nil, callerEvent: .ended, callerReason: "unanswered")
        } else {
            for member in draft.group.members where member.state == .ringing {
                draft.endRing(of: member.identity, as: .missed, event: .missed, reason: "unanswered")
                draft.tellCaller(.participantUpdated, reason: "unanswered", about: member.identity)
            }
        }
        return draft.result
    }

    /// The change that keeps a new ring group from ringing its busy identities (`ifBusy:
    /// reject`): they are `busy`, and when that is all of them the call ends at once as `rejected`
    /// with reason `busy`, told to the caller. `nil` when none is busy.
    public static func refuse(busy: Set<String>, in call: Call, at now: Date) -> GroupCallChange? {
        notRung(busy, as: .busy, in: call, at: now)
    }

    /// The change for identities a new ring group found nothing to ring for: `unreachable`. `nil`
    /// when there are none. (When none of its identities can be rung, the whole call is unreachable
    /// instead.)
    public static func unreachable(_ identities: Set<String>, in call: Call, at now: Date) -> GroupCallChange? {
        notRung(identities, as: .unreachable, in: call, at: now)
    }

    private static func notRung(_ identities: Set<String>, as state: ParticipantState, in call: Call, at now: Date) -> GroupCallChange? {
        guard call.state == .ringing, var draft = try? Draft(call, at: now) else { return nil }
        var changed = false
        for index in draft.group.members.indices where identities.contains(draft.group.members[index].identity) {
            draft.group.members[index].state = state
            draft.group.members[index].endedAt = now
            changed = true
        }
        guard changed else { return nil }
        if !draft.group.anyRinging, state == .busy {
            draft.call.state = .rejected
            draft.call.endReason = .busy
            draft.call.endedAt = now
            draft.tellCaller(.rejected, reason: "busy")
        }
        return draft.result
    }

    private static func memberConflict(_ command: CallCommand, member: CallParticipant, callID: String) -> RingRelayError {
        var error = RingRelayError(
            .conflict, code: command == .end ? RingRelayError.Code.callNotActive : .callNotRinging,
            "'\(ClientText.echo(member.identity))' is \(member.state.rawValue.replacingOccurrences(of: "_", with: " ")) in call '\(ClientText.echo(callID))'; "
                + "\(command.rawValue) needs \(command == .end ? "it in the call" : "it ringing").")
        error.state = member.state.rawValue
        return error
    }

    /// A change being worked out: the call, its group, and what is to be said.
    private struct Draft {
        var call: Call
        var group: RingGroup
        var events: [PlannedEvent] = []
        var unanswered: [String] = []
        let now: Date

        init(_ call: Call, at now: Date) throws(RingRelayError) {
            guard let group = call.group else {
                throw RingRelayError(.internal, code: .storeError, "Call '\(call.id)' is not a ring group.")
            }
            self.call = call
            self.group = group
            self.now = now
        }

        var result: GroupCallChange {
            var call = self.call
            call.group = group
            call.updatedAt = now
            return GroupCallChange(call: call, events: events, unanswered: unanswered)
        }

        private func index(of identity: String) -> Int? {
            group.members.firstIndex { $0.identity == identity }
        }

        mutating func tellCaller(_ kind: CallEventType, reason: String?, about participant: String? = nil) {
            guard let caller = call.callerIdentity else { return }
            events.append(PlannedEvent(kind: kind, identity: caller, devices: .all, reason: reason, participant: participant))
        }

        /// Ends `identity`'s ring without an answer from it, and tells all its devices.
        mutating func endRing(of identity: String, as state: ParticipantState, event: CallEventType, reason: String) {
            guard let index = index(of: identity) else { return }
            group.members[index].state = state
            group.members[index].endedAt = now
            events.append(PlannedEvent(kind: event, identity: identity, devices: .all, reason: reason))
            if state == .missed || state == .cancelled { unanswered.append(identity) }
        }

        /// `identity` answers on `device`: in mode `first` the call is theirs and everyone else's
        /// ring ends as answered elsewhere; in mode `all` the others ring on.
        mutating func accept(_ identity: String, device: String?) {
            guard let index = index(of: identity) else { return }
            group.members[index].state = .accepted
            group.members[index].answeredBy = device
            group.members[index].answeredAt = now
            toActing(identity, device: device, kind: .accepted, others: .answeredElsewhere, reason: nil, othersReason: "answered_elsewhere")
            if call.state == .ringing {
                call.state = .accepted
                call.answeredAt = now
                call.answeredBy = device
                tellCaller(.accepted, reason: nil, about: identity)
            } else {
                tellCaller(.participantUpdated, reason: "accepted", about: identity)
            }
            guard group.mode == .first else { return }
            for other in group.members where other.state == .ringing {
                endRing(of: other.identity, as: .answeredElsewhere, event: .answeredElsewhere, reason: "answered_elsewhere")
            }
        }

        /// `identity` declines on `device`. When nobody is left ringing or in the call, the call
        /// ends as `rejected`.
        mutating func decline(_ identity: String, device: String?) {
            guard let index = index(of: identity) else { return }
            group.members[index].state = .declined
            group.members[index].endedAt = now
            toActing(identity, device: device, kind: .rejected, others: .declinedElsewhere, reason: "declined", othersReason: "declined_elsewhere")
            if !group.anyRinging, group.joined.isEmpty {
                call.state = .rejected
                call.endReason = .declined
                call.endedAt = now
                call.endedBy = identity
                tellCaller(.rejected, reason: "declined")
            } else {
                tellCaller(.participantUpdated, reason: "declined", about: identity)
            }
        }

        /// `identity`, in the call, hangs up. The call ends with the last one out; until then the
        /// caller hears who left.
        mutating func leave(_ identity: String) {
            guard let index = index(of: identity) else { return }
            let member = group.members[index]
            group.members[index].state = .left
            group.members[index].endedAt = now
            if let device = member.answeredBy {
                events.append(PlannedEvent(kind: .ended, identity: identity, devices: .only(device), reason: "hangup"))
            }
            if group.joined.isEmpty {
                finish(.ended, reason: .hangup, by: identity, callerEvent: .ended, callerReason: "hangup")
            } else {
                tellCaller(.participantUpdated, reason: "left", about: identity)
            }
        }

        /// Ends the whole call: the devices in it hear `call.ended`, every identity still ringing
        /// its own ending (`missed` at the timeout, `cancelled` otherwise), the caller's devices
        /// `callerEvent`.
        mutating func finish(_ state: CallState, reason: CallEndReason, by endedBy: String?, callerEvent: CallEventType, callerReason: String) {
            for member in group.members {
                switch member.state {
                case .ringing where state == .missed:
                    endRing(of: member.identity, as: .missed, event: .missed, reason: "unanswered")
                case .ringing:
                    endRing(of: member.identity, as: .cancelled, event: .cancelled, reason: "cancelled")
                case .accepted:
                    if let index = index(of: member.identity) { group.members[index].endedAt = now }
                    if let device = member.answeredBy {
                        events.append(PlannedEvent(kind: .ended, identity: member.identity, devices: .only(device), reason: "hangup"))
                    }
                default:
                    break
                }
            }
            call.state = state
            call.endReason = reason
            call.endedAt = now
            call.endedBy = endedBy
            tellCaller(callerEvent, reason: callerReason)
        }

        /// The acting device hears `kind`, the identity's other devices `others`.
        private mutating func toActing(
            _ identity: String, device: String?, kind: CallEventType, others: CallEventType, reason: String?, othersReason: String
        ) {
            if let device {
                events.append(PlannedEvent(kind: kind, identity: identity, devices: .only(device), reason: reason))
                events.append(PlannedEvent(kind: others, identity: identity, devices: .allExcept(device), reason: othersReason))
            } else {
                events.append(PlannedEvent(kind: others, identity: identity, devices: .all, reason: othersReason))
            }
        }
    }
}
