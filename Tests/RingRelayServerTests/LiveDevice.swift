import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing
import WSCore

/// A device's live connection in tests: a real WebSocket client (hummingbird-websocket's WSClient)
/// against a live server, recording every frame it gets.
final class LiveDevice: Sendable {
    private struct State {
        var frames: [ServerFrame] = []
        /// Every text frame as it arrived, for byte-exact checks.
        var texts: [String] = []
        var consumed = 0
        var outbound: WebSocketOutboundWriter?
        var closed: WebSocketCloseFrame??
    }

    private let state = Mutex(State())
    private let task = Mutex<Task<Void, Never>?>(nil)
    /// Whether events are acknowledged as they arrive.
    let autoAck: Bool

    private init(autoAck: Bool) {
        self.autoAck = autoAck
    }

    /// Connects and waits for the server's `ready` frame.
    static func connect(
        port: Int, token: String, lastEventID: String? = nil, autoAck: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> LiveDevice {
        let device = LiveDevice(autoAck: autoAck)
        var url = "ws://127.0.0.1:\(port)/v1/connect?access_token=\(token)"
        if let lastEventID { url += "&lastEventId=\(lastEventID)" }
        let logger = TestLogging.logger("test-device", level: .critical)
        let task = Task {
            let close = try? await WebSocketClient.connect(url: url, logger: logger) { inbound, outbound, _ in
                device.state.withLock { $0.outbound = outbound }
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    if case .text(let text) = message { device.state.withLock { $0.texts.append(text) } }
                    guard case .text(let text) = message, let frame = try? JSONDecoder.ringRelay.decode(ServerFrame.self, from: Data(text.utf8))
                    else { continue }
                    device.state.withLock { $0.frames.append(frame) }
                    if device.autoAck, case .event(let event) = frame {
                        try await outbound.write(.text(Self.encode(.ack(eventId: event.eventId))))
                    }
                }
            }
            device.state.withLock { $0.closed = .some(close) }
        }
        device.task.withLock { $0 = task }
        // Generous: when a run starts, dozens of tests start servers and make keys at once on two
        // cores, with a build beside; a first frame took over 10 s there.
        guard case .ready = try await device.next(timeout: .seconds(60), sourceLocation: sourceLocation) else {
            Issue.record("the first frame was not ready", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        return device
    }

    /// Every call event received so far, in order.
    var events: [CallEvent] {
        state.withLock { state in state.frames.compactMap { if case .event(let event) = $0 { event } else { nil } } }
    }

    /// Every text frame received so far, as sent.
    var texts: [String] { state.withLock { $0.texts } }

    /// The `ready` frame's content.
    var ready: LiveReady? {
        state.withLock { state in
            state.frames.lazy.compactMap { if case .ready(let ready) = $0 { ready } else { nil } }.first
        }
    }

    /// Sends a device frame.
    func send(_ frame: DeviceFrame) async throws {
        try await sendText(Self.encode(frame))
    }

    /// Sends raw text.
    func sendText(_ text: String) async throws {
        guard let outbound = state.withLock({ $0.outbound }) else { throw CancellationError() }
        try await outbound.write(.text(text))
    }

    /// The next frame not yet returned, waiting up to `timeout`.
    func next(timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation) async throws -> ServerFrame {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let frame: ServerFrame? = state.withLock { state in
                guard state.consumed < state.frames.count else { return nil }
                state.consumed += 1
                return state.frames[state.consumed - 1]
            }
            if let frame { return frame }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("no frame within \(timeout)", sourceLocation: sourceLocation)
        throw CancellationError()
    }

    /// The next frame, which must be a call event.
    func nextEvent(timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation) async throws -> CallEvent {
        let frame = try await next(timeout: timeout, sourceLocation: sourceLocation)
        guard case .event(let event) = frame else {
            Issue.record("expected an event, got \(frame)", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        return event
    }

    /// Whether any frame arrives within `window` (for asserting silence).
    func receivesNothing(within window: Duration = .milliseconds(300)) async throws -> Bool {
        try await Task.sleep(for: window)
        return state.withLock { $0.consumed == $0.frames.count }
    }

    /// Waits until the server closed the connection and returns the close code it sent.
    func closeCode(timeout: Duration = .seconds(10)) async throws -> WebSocketErrorCode? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let closed = state.withLock({ $0.closed }) { return closed?.closeCode }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the connection stayed open")
        return nil
    }

    /// Closes the connection and waits until it is gone.
    func close() async {
        if let outbound = state.withLock({ $0.outbound }) {
            try? await outbound.close(.normalClosure, reason: nil)
        }
        await task.withLock { $0 }?.value
    }

    private static func encode(_ frame: DeviceFrame) -> String {
        String(decoding: (try? JSONEncoder.ringRelay.encode(frame)) ?? Data(), as: UTF8.self)
    }
}
