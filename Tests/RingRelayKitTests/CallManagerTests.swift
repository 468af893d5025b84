import Foundation
import RingRelayKit
import RingRelayWire
import Synchronization
import Testing

@Suite("Call manager")
struct CallManagerTests {
    let ui = RecordingSystemUI()

    private func ringing(_ manager: CallManager, _ callId: String, calleeBusy: Bool? = nil) throws -> Call {
        try #require(manager.handlePush(Make.invite(callId, calleeBusy: calleeBusy)).call)
    }

    @Test("Two incoming calls: answering the second holds the first")
    func answerSecondHoldsFirst() async throws {
        let manager = CallManager.testing(ui: ui)
        let first = try ringing(manager, "call_a")
        let second = try ringing(manager, "call_b")
        try await first.answer()
        #expect(first.state == .connected)
        try await second.answer()
        #expect(second.state == .connected)
        #expect(first.state == .held)
        #expect(ui.records.suffix(2) == [.held(first.uuid, true), .fulfilled(second.uuid)])
    }

    @Test("swap toggles the connected and the held call")
    func swapToggles() async throws {
        let manager = CallManager.testing(ui: ui)
        let first = try ringing(manager, "call_a")
        let second = try ringing(manager, "call_b")
        try await first.answer()
        try await second.answer()
        #expect(manager.swap())
        #expect(first.state == .connected)
        #expect(second.state == .held)
        #expect(manager.swap())
        #expect(first.state == .held)
        #expect(second.state == .connected)
    }

    @Test("Rejecting the second call leaves the first untouched")
    func rejectSecond() async throws {
        let manager = CallManager.testing(ui: ui)
        let first = try ringing(manager, "call_a")
        try await first.answer()
        let second = try ringing(manager, "call_b")
        try await second.reject()
        #expect(first.state == .connected)
        #expect(second.state == .ended(nil))
        #expect(ui.count(.endedByUser(second.uuid)) == 1)
        #expect(!ui.records.contains(.held(first.uuid, true)))
        #expect(manager.calls.map(\.uuid) == [first.uuid])
    }

    @Test("Ending the connected call resumes nothing by itself")
    func endDoesNotResume() async throws {
        let manager = CallManager.testing(ui: ui)
        let first = try ringing(manager, "call_a")
        let second = try ringing(manager, "call_b")
        try await first.answer()
        try await second.answer()
        try await second.end()
        #expect(first.state == .held)
        try first.resume()
        #expect(first.state == .connected)
        #expect(ui.records.last == .held(first.uuid, false))
    }

    @Test("Answered elsewhere ends the right call while another is held")
    func answeredElsewhereWhileHeld() async throws {
        let manager = CallManager.testing(ui: ui)
        let first = try ringing(manager, "call_a")
        try await first.answer()
        try first.hold()
        let second = try ringing(manager, "call_b")
        manager.handle(Make.event(.answeredElsewhere, "evt_1", callId: "call_b", state: "accepted", reason: "answered_elsewhere"))
        #expect(second.state == .ended(.answeredElsewhere))
        #expect(ui.endReasons(for: second.uuid) == [.answeredElsewhere])
        #expect(first.state == .held)
        manager.handle(Make.event(.cancelled, "evt_2", callId: "call_unknown", state: "cancelled", reason: "cancelled"))
        #expect(first.state == .held)
    }

    @Test("A call beyond the maximum is reported and ended as failed")
    func maximumCalls() throws {
        let manager = CallManager.testing(ui: ui, maximumCalls: 2)
        _ = try ringing(manager, "call_a")
        _ = try ringing(manager, "call_b")
        let third = manager.handlePush(Make.invite("call_c"))
        guard case .endedAtOnce(.failed) = third.outcome else {
            Issue.record("expected the third call to end as failed, got \(third.outcome)")
            return
        }
        #expect(ui.incomingReports.last?.uuid == third.uuid)
        #expect(ui.endReasons(for: third.uuid) == [.failed])
        #expect(manager.calls.count == 2)
        // Over the live connection too.
        manager.handle(Make.event(.incoming, "evt_9", callId: "call_d"))
        #expect(ui.endReasons(for: CallKey.ringRelay(callId: "call_d").uuid) == [.failed])
    }

    @Test("calleeBusy is surfaced from the push and from the live event")
    func calleeBusy() throws {
        let manager = CallManager.testing(ui: ui, maximumCalls: 3)
        #expect(try ringing(manager, "call_a", calleeBusy: true).calleeBusy)
        #expect(try !ringing(manager, "call_b").calleeBusy)
        manager.handle(Make.event(.incoming, "evt_1", callId: "call_c", calleeBusy: true))
        #expect(manager.call(uuid: CallKey.ringRelay(callId: "call_c").uuid)?.calleeBusy == true)
    }

    @Test("A call seen on the live connection and then by push is one call, and the push is reported")
    func socketThenPush() throws {
        let manager = CallManager.testing(ui: ui)
        manager.handle(Make.event(.incoming, "evt_1", callId: "call_a"))
        let report = manager.handlePush(Make.invite("call_a"))
        #expect(manager.calls.count == 1)
        #expect(report.call === manager.calls.first)
        #expect(ui.incomingReports.map(\.uuid) == [report.uuid, report.uuid])
        #expect(ui.endReasons(for: report.uuid).isEmpty)
    }

    @Test("A push after the live connection said the call was cancelled is reported and ended")
    func latePush() {
        let manager = CallManager.testing(ui: ui)
        manager.handle(Make.event(.cancelled, "evt_1", callId: "call_a", state: "cancelled", reason: "cancelled"))
        let report = manager.handlePush(Make.invite("call_a"))
        guard case .endedAtOnce(.remoteEnded) = report.outcome else {
            Issue.record("expected remote ended, got \(report.outcome)")
            return
        }
        #expect(ui.endReasons(for: report.uuid) == [.remoteEnded])
    }

    @Test("An expired push is reported and ended as unanswered")
    func expiredPush() {
        let manager = CallManager.testing(ui: ui, now: Dates.expired)
        let report = manager.handlePush(Make.invite("call_a"))
        guard case .endedAtOnce(.unanswered) = report.outcome else {
            Issue.record("expected unanswered, got \(report.outcome)")
            return
        }
        #expect(ui.records == [.incoming(IncomingCallReport(uuid: report.uuid, caller: CallParty(identity: "alice", displayName: "Alice"), hasVideo: false)), .ended(report.uuid, .unanswered)])
        #expect(manager.calls.isEmpty)
    }

    @Test("A Twilio cancel push ends the Twilio call it names")
    func twilioCancel() throws {
        let manager = CallManager.testing(ui: ui)
        var call = try Fixture.dictionary("voip-push-cancel-real-2017")
        call["twi_message_type"] = "twilio.voice.call"
        let ringing = try #require(manager.handlePush(call).call)
        #expect(ringing.source == .twilio)
        #expect(ringing.providerPayload?["twi_call_sid"]?.stringValue == "CA89c68e8530b32dc78a01855feade80d2")
        let cancel = manager.handlePush(try Fixture.dictionary("voip-push-cancel-real-2017"))
        #expect(cancel.uuid == ringing.uuid)
        #expect(ringing.state == .ended(.remoteEnded))
        #expect(ui.endReasons(for: ringing.uuid) == [.remoteEnded])
    }

    @Test("A call the system refuses (Do Not Disturb) ends without ringing")
    func systemRefusal() throws {
        ui.refusedUUID.withLock { $0 = CallKey.ringRelay(callId: "call_a").uuid }
        let manager = CallManager.testing(ui: ui)
        let call = try ringing(manager, "call_a")
        #expect(call.state == .ended(.failed))
        #expect(manager.calls.isEmpty)
    }

    @Test("Callbacks and the update stream follow the call on the injected executor")
    func observers() async throws {
        let manager = CallManager.testing(ui: ui)
        let heard = Mutex<[String]>([])
        let token = manager.addObserver { event in
            guard case .incomingCall(let call) = event else { return }
            heard.withLock { $0.append("incoming \(call.remote.identity)") }
            call.onRinging = { heard.withLock { $0.append("ringing") } }
            call.onConnected = { heard.withLock { $0.append("connected") } }
            call.onDisconnected = { reason in heard.withLock { $0.append("disconnected \(String(describing: reason))") } }
        }
        let call = try ringing(manager, "call_a")
        let updates = call.updates()
        try await call.answer()
        manager.handle(Make.event(.ended, "evt_1", callId: "call_a", state: "ended", reason: "hangup"))
        #expect(heard.withLock { $0 } == ["incoming alice", "ringing", "connected", "disconnected Optional(RingRelayKit.CallEndReason.remoteEnded)"])
        var states: [CallUpdate] = []
        for await update in updates { states.append(update) }
        #expect(states == [.stateChanged(.ringing), .stateChanged(.connecting), .stateChanged(.connected), .stateChanged(.ended(.remoteEnded))])
        token.cancel()
    }

    @Test("Hold and resume need a call in progress")
    func holdNeedsCallInProgress() throws {
        let manager = CallManager.testing(ui: ui)
        let call = try ringing(manager, "call_a")
        #expect(throws: RingRelayError.invalidCallState(.ringing)) { try call.hold() }
        #expect(!manager.swap())
    }
}
