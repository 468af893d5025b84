import Foundation
import RingRelayWire
import Synchronization

extension CallManager {
    /// Applies one live call event: rings new calls, ends the calls the server ended, confirms
    /// answers, follows a ring group's participants. ``RingRelayClient`` calls this for every
    /// event; call it yourself when you carry the events some other way.
    public func handle(_ event: CallEvent) {
        if !event.type.isRing { keepEarly(event) }
        // First, so that observers hear who answered before they hear the call connect.
        refreshParticipants(from: event)
        switch event.type {
        case .incoming:
            let info = Call.Info(
                remote: CallParty(
                    identity: event.call.from ?? CallParty.unknown.identity, displayName: event.call.displayName,
                    avatarURL: AvatarURLRules.url(event.call.avatarUrl)),
                media: CallMedia(wireValue: event.call.media), calleeBusy: event.calleeBusy ?? false, serverCallId: event.callId,
                metadata: event.call.metadata, ringMode: event.call.ringMode, participants: event.call.ringGroup)
            ring(
                Sighting(
                    key: .ringRelay(callId: event.callId), source: .ringRelay, info: info, fromPush: false, lostReason: lostReason(event),
                    sealedBox: event.sealed))
        case .notification:
            ringProviderCall(event)
        case .accepted:
            guard let call = call(serverCallId: event.callId) else { return }
            if call.direction == .incoming {
                confirmAnswer(call)
            } else if call.transition(to: .connected, if: { $0 == .ringing }) != nil {
                // Once: a ring group in mode all tells the caller of later answers with
                // `call.participant_updated`, and the transition refuses a connected call anyway.
                systemUI.reportOutgoingCallConnected(uuid: call.uuid)
            }
        case .rejected:
            guard let call = call(serverCallId: event.callId) else { return }
            // To the caller: the callee declined. To the declining device: its own decline.
            if call.direction == .outgoing {
                finish(call, reason: CallEndReason(outgoingRejection: event.reason), reportToSystem: true)
            } else {
                finish(call, reason: nil, reportToSystem: true)
            }
        case .cancelled:
            finish(serverCallId: event.callId, reason: .remoteEnded)
        case .answeredElsewhere:
            finish(serverCallId: event.callId, reason: .answeredElsewhere)
        case .declinedElsewhere:
            finish(serverCallId: event.callId, reason: .declinedElsewhere)
        case .missed:
            finish(serverCallId: event.callId, reason: .unanswered)
        case .ended:
            finish(serverCallId: event.callId, reason: event.reason.flatMap(CallEndReason.init(serverReason:)) ?? .remoteEnded)
        case .participantUpdated:
            // Never an ending: the call goes on for the others. Who joined, declined, missed the
            // ring or left is in the participants refreshed above.
            return
        }
    }

    /// Every event carries the call as it is after the change: a known ring group's call takes
    /// its participants from it.
    private func refreshParticipants(from event: CallEvent) {
        guard event.call.participants != nil, let call = call(serverCallId: event.callId) else { return }
        call.updateParticipants(event.call.ringGroup)
    }

    /// How long a change of an unknown call is kept, and how many are.
    static let earlyEventLifetime: TimeInterval = 30
    static let earlyEventLimit = 64

    /// Keeps a change of a call this device does not know (yet); ``startCall(to:media:displayName:avatarURL:metadata:options:)``
    /// applies the ones of the call it has just placed. (The event is handled as well: an end
    /// still tells a late push of the call to end at once.)
    private func keepEarly(_ event: CallEvent) {
        let now = configuration.now()
        table.withLock { table in
            let key = table.keysByServerId[event.callId] ?? .ringRelay(callId: event.callId)
            guard table.call(for: key) == nil else { return }
            table.early.removeAll { now.timeIntervalSince($0.at) > Self.earlyEventLifetime }
            if table.early.count >= Self.earlyEventLimit { table.early.removeFirst() }
            table.early.append((event, now))
        }
    }

    /// A Twilio or Webex call announced over the live connection: keyed by the provider's id, so
    /// the VoIP push of the same call finds it.
    private func ringProviderCall(_ event: CallEvent) {
        let content = PushParser.parse(providerPayload: event.payload ?? .null, provider: event.provider)
        let source: CallSource
        let caller: CallParty
        let payload: JSONValue
        switch content {
        case .twilioCall(let notification):
            (source, caller, payload) = (.twilio, notification.caller, notification.payload)
        case .webex(let notification):
            (source, caller, payload) = (.webex, notification.caller, notification.payload)
        case .ringRelay, .twilioCancel, .unrecognized:
            return
        }
        let info = Call.Info(
            remote: caller, media: CallMedia(wireValue: event.call.media), calleeBusy: event.calleeBusy ?? false, serverCallId: event.callId,
            providerPayload: payload)
        ring(Sighting(key: content.key, source: source, info: info, fromPush: false, lostReason: lostReason(event)))
    }

    /// Why a ring event (perhaps replayed after a reconnect) can no longer ring, if it cannot.
    private func lostReason(_ event: CallEvent) -> CallEndReason? {
        if configuration.now() >= event.call.ringEndsAt { return .unanswered }
        return CallEndReason(notRinging: event.call, deviceId: signaling?.deviceId)
    }
}
