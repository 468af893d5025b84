import Dispatch
import Foundation
import RingRelayWire
import Synchronization

/// All calls of this device: reports them to the system call UI, keeps several at once (hold,
/// resume, swap) and follows the server's word on each.
///
/// Feed it every VoIP push (``handlePush(_:)-(Dictionary<AnyHashable,Any>)``) and, through
/// ``RingRelayClient``, every live event. Watch its calls with any number of observers
/// (``addObserver(on:_:)``); a system UI bridge hands it the user's actions
/// (``perform(_:for:)``). Rules it keeps:
/// - every push is reported to the system UI exactly once, whatever it holds;
/// - answering a call holds the connected one; rejecting or ending a call touches no other call;
/// - an incoming call beyond ``Configuration/maximumCalls`` is reported and ended as failed.
public final class CallManager: Sendable {
    /// How the manager behaves.
    public struct Configuration: Sendable {
        /// How many calls may be in progress or ringing at once; CallKit's default is two call groups.
        public var maximumCalls: Int
        /// Where call callbacks run.
        public var callbackExecutor: any CallbackExecutor
        /// The current time, to drop expired pushes.
        public var now: @Sendable () -> Date
        /// How many ended calls are remembered to recognise late sightings of them.
        public var rememberedEndedCalls: Int

        /// Creates a configuration.
        public init(
            maximumCalls: Int = 2, callbackExecutor: any CallbackExecutor = DispatchQueue.main,
            now: @escaping @Sendable () -> Date = { Date() }, rememberedEndedCalls: Int = 100
        ) {
            self.maximumCalls = maximumCalls
            self.callbackExecutor = callbackExecutor
            self.now = now
            self.rememberedEndedCalls = rememberedEndedCalls
        }
    }

    /// What happened to one push.
    public struct PushReport: Sendable {
        /// The UUID the push was reported to the system call UI under.
        public var uuid: UUID
        /// What the push held.
        public var content: PushContent
        /// The call it rings (or already rang), or the reason it was ended at once.
        public var outcome: Outcome

        /// How a push ended up.
        public enum Outcome: Sendable {
            /// The push is about this call, which rings (or was already known).
            case call(Call)
            /// The push was reported and ended at once: expired, cancelled, malformed, one call too many.
            case endedAtOnce(CallEndReason)
        }

        /// The call, when the push rings one.
        public var call: Call? {
            if case .call(let call) = outcome { call } else { nil }
        }
    }

    /// This manager's configuration.
    public let configuration: Configuration
    let systemUI: any SystemCallUI
    let signaling: (any CallSignaling)?
    /// Opens the boxes of sealed rings; without it, a sealed ring ends at once as failed.
    let sealedInvites: (any SealedInviteOpening)?

    struct Table: Sendable {
        var calls: [Call] = []
        var keysByServerId: [String: CallKey] = [:]
        /// Changes of calls not known here yet, kept ``earlyEventLifetime``: the callee can answer
        /// a call this device places before `POST /v1/calls` has answered it.
        var early: [(event: CallEvent, at: Date)] = []
        var recent: RecentCalls
        /// Registered observers, in the order they were added.
        var observers: [Observer] = []
        var nextObserverID = 0
        /// The deprecated ``CallManager/onIncomingCall`` closure and the observer that calls it.
        var incomingCallShim: (handler: @Sendable (Call) -> Void, token: ObservationToken)?

        func call(for key: CallKey) -> Call? { calls.first { $0.key == key } }
    }

    let table: Mutex<Table>

    /// Creates a manager.
    ///
    /// - Parameters:
    ///   - systemUI: the system call UI to drive.
    ///   - signaling: the server; without one, calls are handled locally (answer confirms at once).
    ///   - configuration: limits, callback executor, clock.
    ///   - sealedInvites: opens the boxes of sealed rings (``RingRelayClient`` passes itself when
    ///     its configuration has ``RingRelayClient/Configuration/sealedCalls``).
    public init(
        systemUI: any SystemCallUI, signaling: (any CallSignaling)? = nil, configuration: Configuration = Configuration(),
        sealedInvites: (any SealedInviteOpening)? = nil
    ) {
        self.systemUI = systemUI
        self.signaling = signaling
        self.sealedInvites = sealedInvites
        self.configuration = configuration
        self.table = Mutex(Table(recent: RecentCalls(capacity: configuration.rememberedEndedCalls)))
    }

    /// The calls that are not over, oldest first.
    public var calls: [Call] { table.withLock { $0.calls } }

    /// The live call with this UUID.
    public func call(uuid: UUID) -> Call? { table.withLock { $0.calls.first { $0.uuid == uuid } } }

    // MARK: Pushes

    /// Handles a push dictionary (`PKPushPayload.dictionaryPayload`, or a notification's `userInfo`).
    /// Reports it to the system call UI before returning, always exactly once.
    @discardableResult
    public func handlePush(_ dictionary: [AnyHashable: Any]) -> PushReport {
        handlePush(PushParser.parse(dictionary))
    }

    /// Handles a push payload given as JSON text.
    @discardableResult
    public func handlePush(_ data: Data) -> PushReport {
        handlePush(PushParser.parse(data))
    }

    /// Handles a parsed push.
    @discardableResult
    public func handlePush(_ content: PushContent) -> PushReport {
        let key = content.key
        let outcome: PushReport.Outcome
        switch content {
        case .unrecognized:
            outcome = endAtOnce(key, caller: .unknown, media: .audio, reason: .failed)
        case .twilioCancel(let notification):
            outcome = cancelByPush(key, caller: notification.caller)
        case .ringRelay(let invite):
            let info = Call.Info(
                remote: invite.from.map {
                    CallParty(identity: $0.identity, displayName: $0.displayName, avatarURL: AvatarURLRules.url($0.avatarUrl))
                } ?? .unknown,
                media: CallMedia(wireValue: invite.media), calleeBusy: invite.calleeBusy ?? false, serverCallId: invite.callId,
                metadata: invite.metadata)
            let expired = configuration.now() >= invite.expiresAt
            outcome = ring(
                Sighting(
                    key: key, source: .ringRelay, info: info, fromPush: true, lostReason: expired ? .unanswered : nil, sealedBox: invite.sealed))
        case .twilioCall(let notification):
            let info = Call.Info(remote: notification.caller, media: .audio, providerPayload: notification.payload)
            outcome = ring(Sighting(key: key, source: .twilio, info: info, fromPush: true, lostReason: nil))
        case .webex(let notification):
            let info = Call.Info(remote: notification.caller, media: .audio, providerPayload: notification.payload)
            outcome = ring(Sighting(key: key, source: .webex, info: info, fromPush: true, lostReason: nil))
        }
        return PushReport(uuid: key.uuid, content: content, outcome: outcome)
    }

    // MARK: Ringing

    /// One sighting of an incoming call: a push or a live ring event.
    struct Sighting {
        var key: CallKey
        var source: CallSource
        var info: Call.Info
        /// A push must be reported to the system UI even when the call is known or over.
        var fromPush: Bool
        /// Why the call can no longer ring here, when the push or event came too late.
        var lostReason: CallEndReason?
        /// The sealed invite of a sealed ring: who calls is inside, opened once the call is reported.
        var sealedBox: String?
    }

    private enum RingDecision {
        case created(Call)
        case known(Call)
        case endAtOnce(CallEndReason)
        /// A live event about a call that is over: nothing to report.
        case ignored(CallEndReason)
    }

    /// Rings a sighted call, or recognises it, or ends it at once. Pushes always produce a report;
    /// a live event about a call that is over produces none.
    @discardableResult
    func ring(_ sighting: Sighting) -> PushReport.Outcome {
        let decision = table.withLock { table -> RingDecision in
            if let call = table.call(for: sighting.key) { return .known(call) }
            if let ended = table.recent[sighting.key] {
                return sighting.fromPush ? .endAtOnce(ended ?? .remoteEnded) : .ignored(ended ?? .remoteEnded)
            }
            if let lost = sighting.lostReason {
                table.recent.remember(sighting.key, reason: lost)
                return sighting.fromPush ? .endAtOnce(lost) : .ignored(lost)
            }
            if table.calls.count >= configuration.maximumCalls {
                table.recent.remember(sighting.key, reason: .failed)
                return .endAtOnce(.failed)
            }
            let call = Call(
                key: sighting.key, direction: .incoming, source: sighting.source, info: sighting.info, manager: self,
                executor: configuration.callbackExecutor)
            table.calls.append(call)
            if let serverCallId = sighting.info.serverCallId { table.keysByServerId[serverCallId] = sighting.key }
            return .created(call)
        }
        switch decision {
        case .created(let call):
            // First, so that every observer hears of the call before anything else about it (a
            // refusal by the system below ends it at once).
            publish(.incomingCall(call))
            systemUI.reportIncomingCall(incomingReport(for: call)) { [weak self] error in
                // The system refused the call (Do Not Disturb, a blocked caller): it never rang.
                if error != nil { self?.finish(call, reason: .failed, reportToSystem: false) }
            }
            call.announceRinging()
            if let box = sighting.sealedBox { openSealedRing(box, for: call) }
            if sighting.fromPush { confirmStillRinging(call) }
            return .call(call)
        case .known(let call):
            merge(sighting.info, into: call)
            if sighting.fromPush {
                // Every VoIP push must be reported; the system recognises the UUID it already shows.
                systemUI.reportIncomingCall(incomingReport(for: call)) { _ in }
            }
            return .call(call)
        case .endAtOnce(let reason):
            return endAtOnce(sighting.key, caller: sighting.info.remote, media: sighting.info.media, reason: reason)
        case .ignored(let reason):
            return .endedAtOnce(reason)
        }
    }

    /// What a second sighting adds: the server id a push lacked, the payload an event lacked.
    private func merge(_ info: Call.Info, into call: Call) {
        call.updateInfo { current in
            current.serverCallId = current.serverCallId ?? info.serverCallId
            current.providerPayload = current.providerPayload ?? info.providerPayload
            current.metadata = current.metadata ?? info.metadata
            current.calleeBusy = current.calleeBusy || info.calleeBusy
            current.ringMode = current.ringMode ?? info.ringMode
            if current.remote == .unknown { current.remote = info.remote }
        }
        if let serverCallId = info.serverCallId {
            table.withLock { $0.keysByServerId[serverCallId] = call.key }
        }
    }

    /// A Twilio cancel push: ends the call it names, reporting the push as Twilio advises.
    private func cancelByPush(_ key: CallKey, caller: CallParty) -> PushReport.Outcome {
        guard let call = table.withLock({ $0.call(for: key) }) else {
            table.withLock { $0.recent.remember(key, reason: .remoteEnded) }
            return endAtOnce(key, caller: caller, media: .audio, reason: .remoteEnded)
        }
        systemUI.reportIncomingCall(incomingReport(for: call)) { _ in }
        finish(call, reason: .remoteEnded, reportToSystem: true)
        return .endedAtOnce(.remoteEnded)
    }

    /// Reports a call that must not ring and ends it as soon as the system has it.
    private func endAtOnce(_ key: CallKey, caller: CallParty, media: CallMedia, reason: CallEndReason) -> PushReport.Outcome {
        let uuid = key.uuid
        let systemUI = systemUI
        systemUI.reportIncomingCall(IncomingCallReport(uuid: uuid, caller: caller, hasVideo: media == .video)) { _ in
            systemUI.reportCallEnded(uuid: uuid, reason: reason)
        }
        return .endedAtOnce(reason)
    }

    /// Asks the server whether a pushed RingRelay call still rings, and ends it here when not.
    private func confirmStillRinging(_ call: Call) {
        guard let signaling, call.source == .ringRelay, let callId = call.serverCallId else { return }
        Task { [weak self] in
            guard let resource = try? await signaling.fetchCall(id: callId),
                let reason = CallEndReason(notRinging: resource, deviceId: signaling.deviceId),
                call.state == .ringing
            else { return }
            self?.finish(call, reason: reason, reportToSystem: true)
        }
    }

    func incomingReport(for call: Call) -> IncomingCallReport {
        IncomingCallReport(uuid: call.uuid, caller: call.remote, hasVideo: call.media == .video)
    }

    // MARK: Ending

    /// Ends a call here, once.
    ///
    /// - Parameters:
    ///   - reason: why; `nil` when the user ended it on this device.
    ///   - reportToSystem: whether the system UI still needs to hear of it (not when it asked).
    /// - Returns: whether this call ended it.
    @discardableResult
    func finish(_ call: Call, reason: CallEndReason?, reportToSystem: Bool) -> Bool {
        guard let previous = call.transition(to: .ended(reason), if: { !$0.isEnded }) else { return false }
        table.withLock { table in
            table.calls.removeAll { $0 === call }
            table.recent.remember(call.key, reason: reason)
        }
        if previous == .connecting { systemUI.failAnswer(uuid: call.uuid) }
        if reportToSystem {
            if let reason {
                systemUI.reportCallEnded(uuid: call.uuid, reason: reason)
            } else {
                systemUI.reportCallEndedByUser(uuid: call.uuid)
            }
        }
        return true
    }

    /// Ends the call a server event names, or remembers the end for a call not seen yet.
    func finish(serverCallId: String, reason: CallEndReason) {
        let (call, key) = table.withLock { table in
            let key = table.keysByServerId[serverCallId] ?? .ringRelay(callId: serverCallId)
            return (table.call(for: key), key)
        }
        if let call {
            finish(call, reason: reason, reportToSystem: true)
        } else {
            table.withLock { $0.recent.remember(key, reason: reason) }
        }
    }

    /// The live call a server id names.
    func call(serverCallId: String) -> Call? {
        table.withLock { table in
            table.call(for: table.keysByServerId[serverCallId] ?? .ringRelay(callId: serverCallId))
        }
    }
}
