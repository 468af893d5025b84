import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import NIOWebSocket
import RingRelayKit
import Synchronization

/// RingRelayKit's ``LiveTransport`` on hummingbird-websocket's `WebSocketClient` (SwiftNIO), for
/// platforms without a dependable `URLSessionWebSocketTask` (Linux): `ws://` and `wss://`, with
/// the request headers (the `Authorization` bearer token) sent on the upgrade request.
struct NIOLiveTransport: LiveTransport {
    /// The largest frame accepted from the server.
    var maxFrameBytes = 1 << 20
    /// Longest the WebSocket upgrade may take. hummingbird-websocket's client waits for the
    /// upgrade's answer forever when the server hangs up without one (it keeps its half of the
    /// connection open), so the phone would wait silently; past this it gives up and retries.
    var openTimeout: Duration = .seconds(15)
    /// Where the WebSocket client logs; quiet by default.
    var logger: Logger = {
        var logger = Logger(label: "ringrelay.live")
        logger.logLevel = .critical
        return logger
    }()

    func connect(to url: URL, headers: [String: String]) async throws -> any LiveConnection {
        guard url.scheme == "ws" || url.scheme == "wss", url.host != nil else {
            throw LiveTransportError.unsupportedURL(url.absoluteString)
        }
        var fields = HTTPFields()
        for (name, value) in headers {
            guard let fieldName = HTTPField.Name(name) else { throw LiveTransportError.invalidHeader(name) }
            fields[fieldName] = value
        }
        let configuration = WebSocketClientConfiguration(maxFrameSize: maxFrameBytes, additionalHeaders: fields)
        let connection = NIOLiveConnection(maxFrameBytes: maxFrameBytes)
        try await connection.open(url: url.absoluteString, configuration: configuration, timeout: openTimeout, logger: logger)
        return connection
    }
}

/// Why ``NIOLiveTransport`` could not open a connection.
enum LiveTransportError: Error, CustomStringConvertible {
    /// Not a `ws://` or `wss://` URL.
    case unsupportedURL(String)
    /// A header name that HTTP does not allow.
    case invalidHeader(String)
    /// The connection ended before the WebSocket upgrade completed.
    case closedBeforeOpening
    /// The WebSocket upgrade got no answer in time.
    case openTimedOut
    /// ``NIOLiveConnection/send(_:)`` on a connection that is not open.
    case notOpen

    var description: String {
        switch self {
        case .unsupportedURL(let url): "The live connection needs a ws:// or wss:// URL, got '\(url)'."
        case .invalidHeader(let name): "'\(name)' is not a valid HTTP header name."
        case .closedBeforeOpening: "The connection closed before the WebSocket upgrade completed."
        case .openTimedOut: "The WebSocket upgrade got no answer in time."
        case .notOpen: "The live connection is not open."
        }
    }
}

/// One WebSocket opened by ``NIOLiveTransport``. A task runs the `WebSocketClient`, feeding text
/// frames into ``messages``; the stream finishes when the connection closes (either side) and
/// throws when it fails.
final class NIOLiveConnection: LiveConnection {
    let messages: AsyncThrowingStream<String, any Error>
    private let continuation: AsyncThrowingStream<String, any Error>.Continuation
    private let maxFrameBytes: Int

    private struct State {
        var opening: CheckedContinuation<Void, any Error>?
        var outbound: WebSocketOutboundWriter?
        var task: Task<Void, Never>?
        var closing = false
        var ended = false
    }

    private let state = Mutex(State())

    /// How long ``close()`` waits for the server to answer the close frame.
    private static let closeWait: Duration = .seconds(2)

    init(maxFrameBytes: Int) {
        self.maxFrameBytes = maxFrameBytes
        (messages, continuation) = AsyncThrowingStream.makeStream(of: String.self, throwing: (any Error).self)
    }

    /// Connects and returns once the WebSocket upgrade succeeded.
    ///
    /// - Throws: the client's error when the connection or the upgrade failed (a refused token
    ///   fails the upgrade), ``LiveTransportError/openTimedOut`` when it took over `timeout`.
    func open(url: String, configuration: WebSocketClientConfiguration, timeout: Duration, logger: Logger) async throws {
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            self?.openingTimedOut()
        }
        defer { timer.cancel() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (opening: CheckedContinuation<Void, any Error>) in
                state.withLock { $0.opening = opening }
                let task = Task { await self.run(url: url, configuration: configuration, logger: logger) }
                state.withLock { $0.task = task }
            }
        } onCancel: {
            state.withLock { $0.task }?.cancel()
        }
        // Reading stopped (the client gave up on this connection): close the socket too.
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            Task { await self.close() }
        }
    }

    /// Runs the WebSocket until it closes; reports the opening and the end.
    private func run(url: String, configuration: WebSocketClientConfiguration, logger: Logger) async {
        let maxFrameBytes = maxFrameBytes
        do {
            let closeFrame = try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
                self.opened(outbound)
                for try await message in inbound.messages(maxSize: maxFrameBytes) {
                    switch message {
                    case .text(let text): self.continuation.yield(text)
                    case .binary(let buffer): self.continuation.yield(String(buffer: buffer))
                    }
                }
            }
            // The server's reason to close, for the client to act on (reconnect, new token, stop).
            if let closeFrame, closeFrame.closeCode != .normalClosure {
                ended(LiveConnectionClosed(code: UInt16(webSocketErrorCode: closeFrame.closeCode), reason: closeFrame.reason ?? ""))
            } else {
                ended(nil)
            }
        } catch {
            ended(error)
        }
    }

    /// The upgrade took too long: the opening fails, and the client's task is cancelled. (The
    /// client may not notice: see ``NIOLiveTransport/openTimeout``.)
    private func openingTimedOut() {
        let (opening, task) = state.withLock { state in
            defer { state.opening = nil }
            return (state.opening, state.task)
        }
        guard let opening else { return }
        opening.resume(throwing: LiveTransportError.openTimedOut)
        task?.cancel()
    }

    private func opened(_ outbound: WebSocketOutboundWriter) {
        let opening = state.withLock { state in
            state.outbound = outbound
            defer { state.opening = nil }
            return state.opening
        }
        opening?.resume()
    }

    private func ended(_ error: (any Error)?) {
        let opening = state.withLock { state in
            state.outbound = nil
            state.ended = true
            defer { state.opening = nil }
            return state.opening
        }
        opening?.resume(throwing: error ?? LiveTransportError.closedBeforeOpening)
        continuation.finish(throwing: error)
    }

    func send(_ text: String) async throws {
        guard let outbound = state.withLock({ $0.outbound }) else { throw LiveTransportError.notOpen }
        try await outbound.write(.text(text))
    }

    /// Sends a normal closure, waits briefly for the server's answer, then drops the socket.
    func close() async {
        let (outbound, task, first) = state.withLock { state in
            defer { state.closing = true }
            return (state.outbound, state.task, !state.closing)
        }
        guard first else { return }
        try? await outbound?.close(.normalClosure, reason: nil)
        let deadline = ContinuousClock.now + Self.closeWait
        while !state.withLock({ $0.ended }), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        task?.cancel()
        continuation.finish()
    }
}
