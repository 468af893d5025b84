import Foundation
import RingRelayWire

extension CallManager {
    /// Opens the box of a sealed ring (a VoIP push or a live `call.incoming` that carries one),
    /// which was reported at once without a caller: the caller, media and metadata come from
    /// the box. A box that does not open ends the call as failed, after observers heard why: it
    /// must not ring as it claims.
    func openSealedRing(_ box: String, for call: Call) {
        // A box is opened for the call that carried it; it must name that call.
        guard let sealedInvites, case .ringRelay(let callId) = call.key else {
            // This device cannot read sealed invites: nothing trustworthy to show.
            finish(call, reason: .failed, reportToSystem: true)
            return
        }
        Task { [weak self] in
            do throws(SealedInviteRefusal) {
                let payload = try await sealedInvites.open(box, callId: callId)
                self?.show(payload, in: call)
            } catch {
                self?.publish(.sealedInviteRefused(call, error))
                self?.finish(call, reason: .failed, reportToSystem: true)
            }
        }
    }

    /// Shows an opened invite's caller in the call, and tells the system UI.
    private func show(_ payload: SealedCallPayload, in call: Call) {
        guard !call.state.isEnded else { return }
        call.updateInfo { info in
            info.remote = CallParty(
                identity: payload.caller.identity, displayName: payload.caller.displayName,
                avatarURL: AvatarURLRules.url(payload.caller.avatarUrl))
            info.media = CallMedia(wireValue: payload.media)
            info.metadata = payload.metadata
        }
        systemUI.reportIncomingCallUpdated(incomingReport(for: call))
    }
}
