import Foundation
import RingRelayWire

/// Where a call came from.
public enum CallSource: String, Sendable, Hashable, CaseIterable, Codable {
    /// Twilio's Call Notification webhook.
    case twilio
    /// Webex Calling's `telephony_push` webhook.
    case webex
    /// RingRelay's own calls API.
    case native
}

/// Where a call is in its life: the wire's record state, which the call rules move it through.
public typealias CallState = CallRecordState

/// Audio or video.
public enum CallMedia: String, Sendable, Hashable, CaseIterable, Codable {
    /// Voice only.
    case audio
    /// Voice and video.
    case video
}

/// Why a call reached a final state.
public enum CallEndReason: String, Sendable, Hashable, CaseIterable, Codable {
    /// A callee device declined.
    case declined
    /// The caller gave up before an answer.
    case cancelled
    /// Nobody answered within the ring timeout.
    case unanswered
    /// A participant hung up an accepted call.
    case hangup
    /// The callee was in another call and the caller asked not to ring then (`ifBusy: reject`).
    case busy
}

/// What a call does when its callee is already in an accepted call.
public enum BusyPolicy: String, Sendable, Hashable, CaseIterable, Codable {
    /// Ring anyway, with `calleeBusy: true`: the callee's app offers call waiting.
    case ring
    /// Do not ring: the call ends at once as `rejected` with reason `busy`.
    case reject
}

/// An account's defaults for the calls it places (`/v1/settings/calls`); each call may override them.
public struct CallDefaults: Sendable, Hashable {
    /// What a call to a busy callee does.
    public var ifBusy: BusyPolicy
    /// Whether a cancelled or unanswered call sends "missed call" notices (see ``Call/notifyMissed``).
    public var notifyMissed: Bool

    /// Creates defaults; the built-in ones ring a busy callee and send no missed-call notices.
    public init(ifBusy: BusyPolicy = .ring, notifyMissed: Bool = false) {
        self.ifBusy = ifBusy
        self.notifyMissed = notifyMissed
    }
}

/// One incoming call and the ring it caused.
public struct Call: Sendable, Hashable {
    /// `call_…` identifier.
    public var id: String
    /// Owning account.
    public var accountID: String
    /// Where it came from.
    public var source: CallSource
    /// The caller as the source names it (`client:alice`, a Webex person id, or for native calls
    /// the caller's identity).
    public var caller: String?
    /// The caller's display name, when given.
    public var callerName: String?
    /// The caller's picture, an `https` URL, when given (native calls only).
    public var callerAvatarURL: String?
    /// The identity being rung.
    public var callee: String
    /// Audio or video.
    public var media: CallMedia
    /// The caller's metadata, as JSON text, passed on unchanged.
    public var metadata: String?
    /// Current state.
    public var state: CallState
    /// The source's own id for this notification (`twi_message_id`, Webex webhook `id`),
    /// used to ring once however often it is delivered.
    public var externalID: String?
    /// When the call was created.
    public var createdAt: Date
    /// When ringing stops: no push is attempted after this.
    public var ringDeadline: Date
    /// When the state last changed.
    public var updatedAt: Date
    /// When a callee device accepted.
    public var answeredAt: Date?
    /// The device that accepted.
    public var answeredBy: String?
    /// When the call reached a final state.
    public var endedAt: Date?
    /// Why it ended.
    public var endReason: CallEndReason?
    /// The identity whose command ended it.
    public var endedBy: String?
    /// Whether the callee's devices that never took the ring live get a "missed call" notification
    /// when the call is cancelled or times out; `nil` follows the account's ``CallDefaults``, read
    /// only then.
    public var notifyMissed: Bool?
    /// Whether the caller sealed its invites: the server knows nothing about the call beyond who
    /// and when, and says nothing more (a missed-call notice is neutral).
    public var isSealed: Bool
    /// For a call to several identities at once, how it rings and where each one stands; `nil` for
    /// a call to one identity (``callee``), whose ``state`` says it all. ``callee`` is then the
    /// first identity named.
    public var group: RingGroup?
    /// Counts the call's changes: a ring group's changes are applied only to the version they were
    /// computed from (``CallStore/updateCall(_:expectedVersion:)``).
    public var version: Int

    /// Creates a call.
    public init(
        id: String, accountID: String, source: CallSource, caller: String?, callerName: String? = nil, callerAvatarURL: String? = nil,
        callee: String,
        media: CallMedia = .audio, metadata: String? = nil, state: CallState, externalID: String?, createdAt: Date, ringDeadline: Date,
        updatedAt: Date, answeredAt: Date? = nil, answeredBy: String? = nil, endedAt: Date? = nil, endReason: CallEndReason? = nil,
        endedBy: String? = nil, notifyMissed: Bool? = nil, isSealed: Bool = false, group: RingGroup? = nil, version: Int = 0
    ) {
        self.id = id
        self.accountID = accountID
        self.source = source
        self.caller = caller
        self.callerName = callerName
        self.callerAvatarURL = callerAvatarURL
        self.callee = callee
        self.media = media
        self.metadata = metadata
        self.state = state
        self.externalID = externalID
        self.createdAt = createdAt
        self.ringDeadline = ringDeadline
        self.updatedAt = updatedAt
        self.answeredAt = answeredAt
        self.answeredBy = answeredBy
        self.endedAt = endedAt
        self.endReason = endReason
        self.endedBy = endedBy
        self.notifyMissed = notifyMissed
        self.isSealed = isSealed
        self.group = group
        self.version = version
    }

    /// Whether `identity` takes part in the call. For provider calls the caller is not an
    /// identity of the account, so only the callee does.
    public func isParticipant(_ identity: String) -> Bool {
        isCallee(identity) || (source == .native && identity == caller)
    }

    /// Whether `identity` is rung by the call: its callee, or one of its ring group.
    public func isCallee(_ identity: String) -> Bool {
        guard let group else { return identity == callee }
        return group.member(identity) != nil
    }

    /// The identities the call rings, in the order the caller named them.
    public var callees: [String] {
        group?.members.map(\.identity) ?? [callee]
    }

    /// Whether `identity`'s devices should still be ringing for this call (a push that falls back
    /// from an unacknowledged live ring checks this first).
    public func isRinging(_ identity: String) -> Bool {
        guard let group else { return state == .ringing }
        return isLive && group.member(identity)?.state == .ringing
    }

    /// The caller's identity, for native calls.
    public var callerIdentity: String? { source == .native ? caller : nil }

    /// Whether the call can still change (ringing or in progress).
    public var isLive: Bool { state == .ringing || state == .accepted }
}

/// One attempt to reach one device for one call.
public struct Delivery: Sendable, Hashable {
    /// `dlv_…` identifier.
    public var id: String
    /// The call.
    public var callID: String
    /// The binding pushed to; `nil` for a live-connection delivery.
    public var bindingID: String?
    /// The device rung: a live connection's device, or the binding's `deviceId` when it has one.
    public var deviceID: String?
    /// `apns`, `fcm` or `websocket`.
    public var channel: PushChannel
    /// Push kind (`voip`, `alert`, `data`).
    public var kind: String
    /// `pending` until the first answer, then the outcome's disposition name.
    public var outcome: String
    /// HTTP status of the push service's answer.
    public var status: Int?
    /// The push service's reason, verbatim.
    public var reason: String?
    /// The push id (`apns-id`, FCM message name).
    public var providerID: String?
    /// Attempts made.
    public var attempts: Int
    /// Send-to-answer time of the last attempt, in milliseconds.
    public var latencyMs: Double?
    /// When the delivery was planned.
    public var createdAt: Date
    /// When the final answer came.
    public var completedAt: Date?

    /// The outcome name of a delivery without an answer yet.
    public static let pending = "pending"

    /// Creates a delivery.
    public init(
        id: String, callID: String, bindingID: String?, deviceID: String? = nil, channel: PushChannel, kind: String,
        outcome: String = Delivery.pending,
        status: Int? = nil, reason: String? = nil, providerID: String? = nil, attempts: Int = 0, latencyMs: Double? = nil,
        createdAt: Date, completedAt: Date? = nil
    ) {
        self.id = id
        self.callID = callID
        self.bindingID = bindingID
        self.deviceID = deviceID
        self.channel = channel
        self.kind = kind
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.providerID = providerID
        self.attempts = attempts
        self.latencyMs = latencyMs
        self.createdAt = createdAt
        self.completedAt = completedAt
    }

    /// This delivery with a push outcome filled in.
    public func completed(with outcome: PushOutcome, at date: Date) -> Delivery {
        var copy = self
        copy.outcome = outcome.disposition.metricName
        copy.status = outcome.status
        copy.reason = outcome.reason
        copy.providerID = outcome.providerID
        copy.attempts = outcome.attempts
        copy.latencyMs = (outcome.latency.timeInterval * 1_000_000).rounded() / 1000
        copy.completedAt = date
        return copy
    }
}

/// What creating a call with an external id found.
public enum CallCreation: Sendable, Hashable {
    /// The call is new; `busy` names the identities it rings that were in an accepted call (as a
    /// callee, or as the caller of a native call) when it was created.
    case created(Call, busy: Set<String>)
    /// A call with the same source and external id exists: this is a replay.
    case existing(Call)
}

/// Calls and their deliveries.
public protocol CallStore: Sendable {
    /// Creates a call, unless one with the same `(account, source, externalID)` exists, and tells
    /// whether its callee is busy in the same step (for a ring group, which of its identities are).
    func createCall(_ call: Call) async throws -> CallCreation
    /// One call of the account.
    func call(id: String, accountID: String) async throws -> Call?
    /// One page of the account's calls, newest first, filtered by `query`. The work per page is
    /// bounded however large the history is: one index range, and with a `states` filter at most a
    /// fixed window of calls looked at (see ``CallHistoryPage/next``).
    func listCalls(accountID: String, query: CallHistoryQuery) async throws -> CallHistoryPage
    /// Records deliveries, planned or answered: a later record of a delivery id replaces the
    /// earlier one.
    ///
    /// It does not wait for the database: the store may write records behind, several rings'
    /// worth in one statement. ``deliveries(callID:)`` always sees every record made before it,
    /// and closing the store writes what is left; only a crash can lose the last few, which is
    /// why an answer that reports records calls ``flushDeliveries()`` first.
    func recordDeliveries(_ deliveries: [Delivery])
    /// Returns once every record made before the call is committed: a response that reports
    /// deliveries waits for this, so what it reported survives a crash. Concurrent callers share
    /// one write.
    func flushDeliveries() async throws
    /// A call's deliveries in planning (id) order: those after the id `after`, at most `limit`.
    func deliveries(callID: String, after: String?, limit: Int) async throws -> [Delivery]
    /// Moves a call to `state`, with the time.
    func setCallState(id: String, accountID: String, state: CallState, at date: Date) async throws
    /// Applies a state change only if the call is still in one of `change.from` states (and, when
    /// `change.beforeDeadline` is set, still inside its ring time): one conditional update, so of two
    /// concurrent changes exactly one wins, across server instances too.
    /// - Returns: the call after the change, or `nil` when the condition did not hold.
    func transitionCall(_ change: CallChange) async throws -> Call?
    /// Applies each change as ``transitionCall(_:)`` does, all in one transaction: a sweep of the
    /// rings that timed out is one commit, not one per call.
    /// - Returns: each change's result, in order.
    func transitionCalls(_ changes: [CallChange]) async throws -> [Call?]
    /// Replaces a ring group's call with `updated` (state, times, participants) if the stored call
    /// is still at `expectedVersion`: one conditional update, so of two concurrent changes computed
    /// from the same version exactly one wins, and the other is computed again from the winner's.
    /// - Returns: the call as stored (its version one higher), or `nil` when the version moved on.
    func updateCall(_ updated: Call, expectedVersion: Int) async throws -> Call?
    /// Calls with identities still ringing whose ring time ended before `date`, oldest deadline
    /// first: ringing calls, and ring groups some of whose identities answered while others still ring.
    func expiredRingingCalls(before date: Date, limit: Int) async throws -> [Call]
    /// Ends up to `limit` calls to one identity (not ring groups) still ringing whose ring time
    /// ended by `date`, oldest deadline first, each as ``CallRules/timeout(_:at:)`` changes it.
    /// Calls another sweep (another instance's) is ending at that moment are left to it, never
    /// waited for.
    /// - Returns: the calls ended, as stored after the change.
    func endUnansweredCalls(at date: Date, limit: Int) async throws -> [Call]
    /// Deletes calls (and their deliveries) created before `date`, and of provider calls (which
    /// carry the provider's notification id, the dedupe of replays) only those created before
    /// `notificationsCreatedBefore` too. Returns how many.
    func pruneCalls(createdBefore date: Date, notificationsCreatedBefore: Date) async throws -> Int
}

extension CallStore {
    /// Deletes every call created before `date`, provider calls included.
    public func pruneCalls(createdBefore date: Date) async throws -> Int {
        try await pruneCalls(createdBefore: date, notificationsCreatedBefore: date)
    }
}

extension CallStore {
    /// All of a call's deliveries, in planning order.
    public func deliveries(callID: String) async throws -> [Delivery] {
        try await deliveries(callID: callID, after: nil, limit: .max)
    }
}
