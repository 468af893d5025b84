import Foundation

extension CallManager {
    /// Carries out an action the user took in the system call UI, and says what the bridge must
    /// do with the system's action: fulfil it, fail it, or leave it to the SDK (an answer waits
    /// for the server). A bridge calls this for every action the system sends, so none is left to
    /// time out; ``CallKitBridge`` does it for CallKit.
    ///
    /// | action | result |
    /// |---|---|
    /// | ``SystemCallAction/answer`` | ``SystemCallActionOutcome/pending`` for a known call: settled by ``SystemCallUI/fulfillAnswer(uuid:)`` or ``SystemCallUI/failAnswer(uuid:)``; failed for an unknown one |
    /// | ``SystemCallAction/end`` | fulfilled, always: the call ends here and on the server (declined, cancelled or hung up) |
    /// | ``SystemCallAction/setHeld(_:)`` | fulfilled for a connected or held call, else failed |
    /// | ``SystemCallAction/setMuted(_:)`` | fulfilled for a call that is not over (observers hear ``Event/muteChanged(_:isMuted:)``), else failed |
    /// | ``SystemCallAction/playDTMF(_:)`` | fulfilled for a connected call (observers hear ``Event/dtmf(_:digits:)``), else failed |
    /// | ``SystemCallAction/start`` | fulfilled for an outgoing call the SDK placed, else failed |
    /// | ``SystemCallAction/setGroup(_:)``, ``SystemCallAction/other(_:)`` | unsupported |
    ///
    /// - Parameters:
    ///   - action: what the user did.
    ///   - uuid: the call it is about.
    /// - Returns: what to do with the system's action.
    public func perform(_ action: SystemCallAction, for uuid: UUID) -> SystemCallActionOutcome {
        switch action {
        case .setGroup, .other:
            return .unsupported
        case .end:
            // The system ends the call on its side whatever happens here; the server hears of it
            // (a decline, a cancel or a hang-up) in the background.
            Task { try? await end(uuid: uuid, origin: .systemUI) }
            return .fulfilled
        case .answer:
            guard let call = call(uuid: uuid) else { return .failed }
            Task { try? await answer(call, origin: .systemUI) }
            return .pending
        case .setHeld(let onHold):
            guard let call = call(uuid: uuid) else { return .failed }
            return outcome { () throws(RingRelayError) in try setHeld(call, onHold, origin: .systemUI) }
        case .setMuted(let muted):
            guard let call = call(uuid: uuid) else { return .failed }
            return outcome { () throws(RingRelayError) in try setMuted(call, muted, origin: .systemUI) }
        case .playDTMF(let digits):
            guard let call = call(uuid: uuid), call.state == .connected, !digits.isEmpty else { return .failed }
            publish(.dtmf(call, digits: digits))
            return .fulfilled
        case .start:
            guard let call = call(uuid: uuid), call.direction == .outgoing else { return .failed }
            return .fulfilled
        }
    }

    /// Mutes or unmutes a call that is not over; the system UI hears of it when the app asked.
    func setMuted(_ call: Call, _ muted: Bool, origin: ActionOrigin) throws(RingRelayError) {
        guard !call.state.isEnded else { throw .invalidCallState(call.state) }
        if call.updateMuted(muted), origin == .app {
            systemUI.reportCallMuted(uuid: call.uuid, muted: muted)
        }
    }

    private func outcome(_ body: () throws(RingRelayError) -> Void) -> SystemCallActionOutcome {
        do {
            try body()
            return .fulfilled
        } catch {
            return .failed
        }
    }
}
