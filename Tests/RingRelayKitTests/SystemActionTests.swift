import Foundation
import RingRelayKit
import RingRelayWire
import Testing

/// What the call manager makes of each system call UI action: the platform-neutral half of the
/// CallKit bridge, which fulfils or fails each `CXAction` as ``CallManager/perform(_:for:)`` says.
@Suite("System call UI actions")
struct SystemActionTests {
    let ui = RecordingSystemUI()

    private func connected(_ manager: CallManager, _ callId: String) async throws -> Call {
        let call = try #require(manager.handlePush(Make.invite(callId)).call)
        try await call.answer()
        return call
    }

    @Test("Mute from the system UI is fulfilled, shown on the call, told to observers and streams, and not echoed back")
    func muteFromSystemUI() async throws {
        let manager = CallManager.testing(ui: ui)
        let call = try await connected(manager, "call_a")
        let heard = Transcript()
        let token = manager.addObserver(heard.record)
        let updates = call.updates()
        #expect(manager.perform(.setMuted(true), for: call.uuid) == .fulfilled)
        #expect(call.isMuted)
        // The same value again (CallKit echoing an app's own mute) is fulfilled and changes nothing.
        #expect(manager.perform(.setMuted(true), for: call.uuid) == .fulfilled)
        #expect(manager.perform(.setMuted(false), for: call.uuid) == .fulfilled)
        #expect(!call.isMuted)
        #expect(heard.all == ["call_a muted true", "call_a muted false"])
        #expect(!ui.records.contains { if case .muted = $0 { true } else { false } })
        try await call.end()
        var seen: [CallUpdate] = []
        for await update in updates { seen.append(update) }
        #expect(seen == [.stateChanged(.connected), .muteChanged(true), .muteChanged(false), .stateChanged(.ended(nil))])
        token.cancel()
    }

    @Test("Mute from the app is reported to the system UI; a call that is over cannot be muted")
    func muteFromApp() async throws {
        let manager = CallManager.testing(ui: ui)
        let call = try await connected(manager, "call_a")
        try call.setMuted(true)
        try call.setMuted(true)
        #expect(ui.count(.muted(call.uuid, true)) == 1)
        try await call.end()
        #expect(throws: RingRelayError.invalidCallState(.ended(nil))) { try call.setMuted(false) }
        #expect(manager.perform(.setMuted(false), for: call.uuid) == .failed)
        #expect(manager.perform(.setMuted(true), for: UUID()) == .failed)
    }

    @Test("DTMF digits of a connected call reach observers for the media engine; elsewhere they fail")
    func dtmf() async throws {
        let manager = CallManager.testing(ui: ui)
        let heard = Transcript()
        let token = manager.addObserver(heard.record)
        let first = try await connected(manager, "call_a")
        #expect(manager.perform(.playDTMF("12#"), for: first.uuid) == .fulfilled)
        #expect(manager.perform(.playDTMF("*"), for: first.uuid) == .fulfilled)
        #expect(heard.all.filter { $0.contains("dtmf") } == ["call_a dtmf 12#", "call_a dtmf *"])
        // Answering a second call holds the first: no tones into a held call, nor a ringing one.
        let second = try #require(manager.handlePush(Make.invite("call_b")).call)
        #expect(manager.perform(.playDTMF("5"), for: second.uuid) == .failed)
        try await second.answer()
        #expect(first.state == .held)
        #expect(manager.perform(.playDTMF("5"), for: first.uuid) == .failed)
        #expect(manager.perform(.playDTMF(""), for: second.uuid) == .failed)
        #expect(manager.perform(.playDTMF("5"), for: UUID()) == .failed)
        #expect(heard.all.filter { $0.contains("dtmf") }.count == 2)
        token.cancel()
    }

    @Test("Grouping calls and actions the SDK does not know are unsupported, whatever the call")
    func unsupported() async throws {
        let manager = CallManager.testing(ui: ui)
        let first = try await connected(manager, "call_a")
        let second = try #require(manager.handlePush(Make.invite("call_b")).call)
        #expect(manager.perform(.setGroup(second.uuid), for: first.uuid) == .unsupported)
        #expect(manager.perform(.setGroup(nil), for: first.uuid) == .unsupported)
        #expect(manager.perform(.other("CXFutureCallAction"), for: first.uuid) == .unsupported)
        #expect(manager.perform(.other("CXFutureCallAction"), for: UUID()) == .unsupported)
        #expect(first.state == .connected)
        #expect(second.state == .ringing)
    }

    @Test("Answer is left pending until the answer settles it; an unknown call fails at once")
    func answer() async throws {
        let manager = CallManager.testing(ui: ui)
        let call = try #require(manager.handlePush(Make.invite("call_a")).call)
        #expect(manager.perform(.answer, for: call.uuid) == .pending)
        #expect(await eventually { ui.count(.fulfilled(call.uuid)) == 1 })
        #expect(call.state == .connected)
        #expect(manager.perform(.answer, for: UUID()) == .failed)
    }

    @Test("End is always fulfilled; hold needs a call in progress; start only for the SDK's own outgoing calls")
    func endHoldStart() async throws {
        let manager = CallManager.testing(ui: ui)
        let call = try #require(manager.handlePush(Make.invite("call_a")).call)
        #expect(manager.perform(.setHeld(true), for: call.uuid) == .failed)
        #expect(manager.perform(.start, for: call.uuid) == .failed)
        try await call.answer()
        #expect(manager.perform(.setHeld(true), for: call.uuid) == .fulfilled)
        #expect(call.state == .held)
        #expect(manager.perform(.setHeld(false), for: call.uuid) == .fulfilled)
        #expect(call.state == .connected)
        #expect(manager.perform(.end, for: call.uuid) == .fulfilled)
        #expect(await eventually { call.state == .ended(nil) })
        #expect(manager.perform(.end, for: UUID()) == .fulfilled)
        #expect(manager.perform(.setHeld(true), for: UUID()) == .failed)
        #expect(manager.perform(.start, for: UUID()) == .failed)
    }
}
