import Foundation

/// Opens WebSocket connections: the seam for the live connection. On Apple platforms
/// ``URLSessionLiveTransport`` is built in; elsewhere plug one in (the `ringrelay` CLI uses
/// hummingbird-websocket), and tests use a fake.
public protocol LiveTransport: Sendable {
    /// Opens a WebSocket to `url` (`ws://` or `wss://`) with these extra request headers.
    ///
    /// - Throws: when the connection cannot be opened (including an HTTP error on the upgrade).
    func connect(to url: URL, headers: [String: String]) async throws -> any LiveConnection
}

/// One open WebSocket carrying text messages.
public protocol LiveConnection: Sendable {
    /// The text messages received, in order. The stream finishes when the connection closes and
    /// throws when it fails. It is read once.
    var messages: AsyncThrowingStream<String, any Error> { get }

    /// Sends one text message.
    func send(_ text: String) async throws

    /// Closes the connection (normal closure); ``messages`` then finishes.
    func close() async
}
