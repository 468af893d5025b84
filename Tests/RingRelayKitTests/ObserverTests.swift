import Foundation
import RingRelayKit
import RingRelayWire
import Synchronization
import Testing

/// An executor that holds its jobs until the test runs them: shows which executor an observer
/// runs on, and when.
final class ManualExecutor: CallbackExecutor {
    private let jobs = Mutex<[@Sendable () -> Void]>([])

    var pending: Int { jobs.withLock { $0.count } }

    func execute(_ work: @escaping @Sendable () -> Void) { jobs.withLock { $0.append(work) } }

    /// Runs every job scheduled so far, in order.
    func drain() {
        let due = jobs.withLock { jobs in
            defer { jobs = [] }
            return jobs
        }
        for job in due { job() }
    }
}

/// What an observer heard, one line per event.
final class Transcript: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func record(_ event: CallManager.Event) {
        let id = event.call.serverCallId ?? "?"
        let line: String =
            switch event {
            case .incomingCall: "incoming \(id)"
            case .outgoingCall: "outgoing \(id)"
            case .stateChanged(_, let state): "\(id) \(state)"
            case .infoChanged: "\(id) info"
            case .participantsChanged(_, let changed):
                "\(id) participants \(changed.map { "\($0.identity) \($0.state.wireValue)" }.joined(separator: ", "))"
            case .muteChanged(_, let muted): "\(id) muted \(muted)"
            case .dtmf(_, let digits): "\(id) dtmf \(digits)"
            case .sealedInviteRefused(_, let refusal): "\(id) refused \(refusal)"
            }
        lines.withLock { $0.append(line) }
    }
}

@Suite("Call manager observers")
struct ObserverTests {
    let ui = RecordingSystemUI()

    @Test("Any number of observers hear every event, each on its own executor, in order")
    func manyObserversEachOnItsExecutor() async throws {
        let manager = CallManager.testing(ui: ui)
        let (first, second) = (ManualExecutor(), ManualExecutor())
        let (heardFirst, heardSecond, heardInline) = (Transcript(), Transcript(), Transcript())
        let tokens = [
            manager.addObserver(on: first, heardFirst.record),
            manager.addObserver(on: second, heardSecond.record),
            manager.addObserver(heardInline.record),  // the configuration's executor: inline in tests
        ]
        let call = try #require(manager.handlePush(Make.invite("call_a")).call)
        try await call.answer()
        let expected = ["incoming call_a", "call_a connecting", "call_a connected"]
        #expect(heardInline.all == expected)
        // Nothing ran on the other executors until they ran their jobs.
        #expect(heardFirst.all.isEmpty && heardSecond.all.isEmpty)
        first.drain()
        #expect(heardFirst.all == expected)
        #expect(heardSecond.all.isEmpty)
        second.drain()
        #expect(heardSecond.all == expected)
        withExtendedLifetime(tokens) {}
    }

    @Test("An observer goes when its token is cancelled or released, and hears nothing still queued")
    func removal() throws {
        let manager = CallManager.testing(ui: ui)
        let executor = ManualExecutor()
        let (kept, cancelled, released) = (Transcript(), Transcript(), Transcript())
        let keptToken = manager.addObserver(on: executor, kept.record)
        let cancelledToken = manager.addObserver(on: executor, cancelled.record)
        do {
            let releasedToken = manager.addObserver(on: executor, released.record)
            _ = try #require(manager.handlePush(Make.invite("call_a")).call)
            #expect(!releasedToken.isCancelled)
        }
        // Queued before the cancel: the cancelled observer does not hear it even so.
        cancelledToken.cancel()
        cancelledToken.cancel()
        #expect(cancelledToken.isCancelled)
        _ = try #require(manager.handlePush(Make.invite("call_b")).call)
        executor.drain()
        #expect(kept.all == ["incoming call_a", "incoming call_b"])
        #expect(cancelled.all.isEmpty)
        #expect(released.all.isEmpty)
        withExtendedLifetime(keptToken) {}
    }

    @Test("Observers hear outgoing calls, info changes and the end, which comes last")
    func outgoingAndInfo() async throws {
        let http = FakeHTTP { request in
            switch (request.method, request.url.path) {
            case ("POST", "/v1/calls"): FakeHTTP.json(201, Make.call("call_o", from: "bob", to: "carol"))
            default: FakeHTTP.json(200, Make.call("call_o", state: "cancelled", from: "bob", to: "carol"))
            }
        }
        let client = RingRelayClient(
            configuration: .init(
                serverURL: URL(string: "https://ring.example.com")!, deviceId: "phone",
                calls: .init(callbackExecutor: InlineExecutor(), now: { Dates.ringing })),
            systemUI: ui, accessToken: { "token" }, http: http, live: nil)
        let heard = Transcript()
        let token = client.calls.addObserver(heard.record)
        let call = try await client.startCall(to: "carol", avatarURL: URL(string: "https://cdn.example.com/bob.png"))
        // CallKit's start action for the call the SDK placed comes back and is fulfilled.
        #expect(client.calls.perform(.start, for: call.uuid) == .fulfilled)
        try await call.end()
        #expect(heard.all == ["outgoing call_o", "call_o ended(nil)"])
        let body = try #require(http.requests("POST", "/v1/calls").first?.body)
        let sent = try JSONDecoder.ringRelay.decode(CreateCallRequest.self, from: body)
        #expect(sent.avatarUrl == "https://cdn.example.com/bob.png")
        #expect(sent.to == ["carol"])

        // A second sighting that adds what the first lacked (here: the callee is busy) is an info change.
        client.calls.handle(Make.event(.incoming, "evt_1", callId: "call_p"))
        client.calls.handle(Make.event(.incoming, "evt_2", callId: "call_p", calleeBusy: true))
        #expect(heard.all.suffix(2) == ["incoming call_p", "call_p info"])
        token.cancel()
    }

    @Test("The deprecated onIncomingCall still works, beside observers, and can be removed")
    @available(*, deprecated, message: "tests the deprecated shim")
    func deprecatedShim() throws {
        let manager = CallManager.testing(ui: ui)
        let legacy = Mutex<[String]>([])
        let heard = Transcript()
        let token = manager.addObserver(heard.record)
        manager.onIncomingCall = { call in legacy.withLock { $0.append(call.serverCallId ?? "?") } }
        #expect(manager.onIncomingCall != nil)
        _ = try #require(manager.handlePush(Make.invite("call_a")).call)
        manager.onIncomingCall = nil
        _ = try #require(manager.handlePush(Make.invite("call_b")).call)
        #expect(legacy.withLock { $0 } == ["call_a"])
        #expect(heard.all == ["incoming call_a", "incoming call_b"])
        token.cancel()
    }
}
