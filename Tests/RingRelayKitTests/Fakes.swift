import Foundation
import RingRelayKit
import RingRelayWire
import Synchronization

/// An HTTP server in a closure: answers requests and records them.
final class FakeHTTP: HTTPTransport {
    typealias Handler = @Sendable (HTTPRequest) async throws -> HTTPResponse

    private let handler: Mutex<Handler>
    private let log = Mutex<[HTTPRequest]>([])

    init(_ handler: @escaping Handler = { _ in HTTPResponse(status: 404) }) {
        self.handler = Mutex(handler)
    }

    var requests: [HTTPRequest] { log.withLock { $0 } }

    func requests(_ method: String, _ path: String) -> [HTTPRequest] {
        requests.filter { $0.method == method && $0.url.path == path }
    }

    func setHandler(_ handler: @escaping Handler) { self.handler.withLock { $0 = handler } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        log.withLock { $0.append(request) }
        return try await handler.withLock { $0 }(request)
    }

    static func json(_ status: Int, _ body: some Encodable) -> HTTPResponse {
        HTTPResponse(status: status, body: (try? JSONEncoder.ringRelay.encode(body)) ?? Data())
    }

    static func error(_ status: Int, _ code: String, state: String? = nil) -> HTTPResponse {
        json(status, ErrorBody(code: code, message: "test", state: state))
    }
}

/// A WebSocket server the test drives by hand.
final class FakeLiveTransport: LiveTransport {
    struct Attempt: Sendable {
        var url: URL
        var headers: [String: String]
    }

    private let state = Mutex<(attempts: [Attempt], connections: [FakeLiveConnection])>(([], []))

    var attempts: [Attempt] { state.withLock { $0.attempts } }

    func connect(to url: URL, headers: [String: String]) async throws -> any LiveConnection {
        let connection = FakeLiveConnection()
        state.withLock {
            $0.attempts.append(Attempt(url: url, headers: headers))
            $0.connections.append(connection)
        }
        return connection
    }

    /// The `index`-th connection the client opened, once it has.
    func connection(_ index: Int) async -> FakeLiveConnection? {
        guard await eventually({ self.state.withLock { $0.connections.count > index } }) else { return nil }
        return state.withLock { $0.connections[index] }
    }
}

/// One connection of ``FakeLiveTransport``.
final class FakeLiveConnection: LiveConnection {
    let messages: AsyncThrowingStream<String, any Error>
    private let continuation: AsyncThrowingStream<String, any Error>.Continuation
    private let sentTexts = Mutex<[String]>([])

    init() {
        (messages, continuation) = AsyncThrowingStream.makeStream(of: String.self, throwing: (any Error).self)
    }

    /// The frames the client sent, decoded.
    var sent: [DeviceFrame] {
        sentTexts.withLock { $0 }.compactMap { try? JSONDecoder().decode(DeviceFrame.self, from: Data($0.utf8)) }
    }

    var acks: [String] {
        sent.compactMap { if case .ack(let eventId) = $0 { eventId } else { nil } }
    }

    func serve(_ frame: ServerFrame) { continuation.yield(Make.json(frame)) }

    func serve(_ event: CallEvent) { serve(.event(event)) }

    func ready(replayed: Int = 0) { serve(.ready(LiveReady(identity: "bob", deviceId: "phone", replayed: replayed))) }

    /// The server drops the connection.
    func drop() { continuation.finish(throwing: URLError(.networkConnectionLost)) }

    /// The server closes the connection with one of RingRelay's close codes.
    func close(by code: LiveCloseCode) { continuation.finish(throwing: LiveConnectionClosed(code: code.rawValue, reason: code.reason)) }

    func send(_ text: String) async throws { sentTexts.withLock { $0.append(text) } }

    func close() async { continuation.finish() }
}
