import Foundation
import RingRelayWire

/// Opens WebSocket connections: the seam for the live connection. On Apple platforms
/// ``URLSessionLiveTransport`` is built in; elsewhere plug one in (the `ringrelay` CLI uses
/// hummingbird-websocket), and tests use a fake.
public protocol LiveTransport: Sendable {
    /// Opens a WebSocket to `url` (`ws://` or `wss://`) with these extra request headers.
    ///
    /// - Throws: when the connection cannot be opened (including an HTTP error on the upgrade).
    func connect(to url: URL, headers: [String: String]) async throws -> any LiveConnection
}

/// The server closed the live connection with a close code other than a normal closure (1000):
/// what ``LiveConnection/messages`` throws then, so the client can act on the reason (see
/// ``LiveCloseCode``: reconnect at once, refresh the token, or stop).
public struct LiveConnectionClosed: Error, Sendable, Hashable, CustomStringConvertible {
    /// The WebSocket close code.
    public var code: UInt16
    /// The close frame's reason text.
    public var reason: String

    /// Creates the error.
    public init(code: UInt16, reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The code as one RingRelay defines, if it is one.
    public var closeCode: LiveCloseCode? { LiveCloseCode(rawValue: code) }

    public var description: String { "the server closed the live connection: \(code) \(reason)" }
}

/// One open WebSocket carrying text messages.
public protocol LiveConnection: Sendable {
    /// The text messages received, in order. The stream finishes when the connection closes
    /// normally, throws ``LiveConnectionClosed`` when the server closed it with another code, and
    /// throws the transport's error when it fails. It is read once.
    var messages: AsyncThrowingStream<String, any Error> { get }

    /// Sends one text message.
    func send(_ text: String) async throws

    /// Closes the connection (normal closure); ``messages`` then finishes.
    func close() async
}
