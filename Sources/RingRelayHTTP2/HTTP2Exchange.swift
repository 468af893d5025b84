import NIOHPACK

/// One request to send over an ``HTTP2ConnectionPool``.
public struct HTTP2Request: Sendable {
    /// `:method`.
    public var method: String
    /// `:path`, with its query.
    public var path: String
    /// Regular header fields (names lowercase); the pool adds the pseudo-header fields.
    public var headers: [(String, String)]
    /// The body, sent in one DATA frame that ends the stream.
    public var body: [UInt8]
    /// Names of the fields (`:path` among them) whose values later requests will not repeat: an
    /// id, a device token's path. They are sent as literals that stay out of the HPACK table
    /// (RFC 7541 §6.2.2), where each would only push out the fields every request repeats (the
    /// authorization token, the topic), to be sent again in full and indexed again.
    public var singleUseFields: Set<String>

    /// Creates a request.
    public init(method: String = "POST", path: String, headers: [(String, String)], body: [UInt8], singleUseFields: Set<String> = []) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.singleUseFields = singleUseFields
    }
}

/// A complete answer: the response HEADERS and every DATA frame up to END_STREAM.
public struct HTTP2Response: Sendable {
    /// `:status`.
    public var status: Int
    /// The response's header fields.
    public var headers: HPACKHeaders
    /// The body, cut at the pool's body limit.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: HPACKHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why a request got no answer, and whether the server may have acted on it.
///
/// The distinction is what keeps pushes exactly-once: a request the server cannot have processed
/// (``Kind-swift.enum/refused``, ``Kind-swift.enum/queueDeadline``, ``Kind-swift.enum/connectFailed``,
/// ``Kind-swift.enum/shutDown``) may be sent again freely; one that may have been processed
/// (``Kind-swift.enum/timedOut``, ``Kind-swift.enum/connectionLost``) only where a duplicate is acceptable.
public struct HTTP2Failure: Error, Sendable, Hashable, CustomStringConvertible {
    /// What happened.
    public enum Kind: String, Sendable, Hashable {
        /// No stream became free before the request's queue deadline; nothing was sent.
        case queueDeadline = "QueueDeadline"
        /// No connection could be opened (DNS, TCP, TLS, ALPN); nothing was sent.
        case connectFailed = "ConnectFailed"
        /// The pool was shut down; nothing was sent.
        case shutDown = "ShutDown"
        /// The server said it did not process the stream (`REFUSED_STREAM`, or above a GOAWAY's
        /// last stream id) more often than the pool resends such streams by itself.
        case refused = "Refused"
        /// No complete answer within the request timeout; the stream was reset. The server may have acted.
        case timedOut = "Timeout"
        /// The connection closed, or the stream was reset, before a complete answer. The server may have acted.
        case connectionLost = "ConnectionLost"
    }

    /// What happened.
    public var kind: Kind
    /// A short cause for logs (an error's description; never request content).
    public var detail: String
    /// The cause as a fixed text, without the state that varies (the pool's connections): what a
    /// rate-limited log tells causes apart by. The detail when there is nothing to leave out.
    public var cause: String

    /// Creates a failure.
    public init(_ kind: Kind, detail: String = "") {
        self.kind = kind
        self.detail = detail
        self.cause = detail
    }

    /// Creates a failure whose detail is a fixed cause and, in parentheses, the state it happened in.
    public init(_ kind: Kind, cause: String, state: String) {
        self.kind = kind
        self.detail = "\(cause) (\(state))"
        self.cause = cause
    }

    /// Whether the server can have processed the request: `false` when it certainly did not.
    public var mayHaveBeenProcessed: Bool {
        switch kind {
        case .queueDeadline, .connectFailed, .shutDown, .refused: false
        case .timedOut, .connectionLost: true
        }
    }

    public var description: String { detail.isEmpty ? kind.rawValue : "\(kind.rawValue): \(detail)" }
}
