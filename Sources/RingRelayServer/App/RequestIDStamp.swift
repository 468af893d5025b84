import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Puts `X-Request-Id` on the answers no route writes, so that every response carries one
/// (``UnparsableRequestGuard``'s 400, Hummingbird's own answer to a later request it cannot
/// parse), and puts the router's answer in place of the bare 400 hummingbird-websocket writes
/// when the router refused a WebSocket upgrade.
///
/// hummingbird-websocket runs the router on an upgrade request and, when the route does not
/// upgrade, throws the router's answer away and writes `400` with an empty body: a device whose
/// token was missing, forged, expired or signed out could not tell which, nor that it was a 401
/// at all. ``RequestIDMiddleware`` hands the router's answer to this handler
/// (``answerRefusedUpgrade(with:body:on:)``), and it goes out in place of the library's: its
/// status, headers (`WWW-Authenticate`, the request id the access log line carries) and error
/// body, with `Connection: close`, as the library closes the connection after it.
///
/// It sits right after the HTTP parser, so every response head of the connection passes it; an
/// answer that has an id already (every route's, through ``RequestIDMiddleware``) passes as it
/// is. After the `101` of an accepted upgrade it passes WebSocket frames along unread. (Taking
/// itself out of the pipeline while the upgrade writes its `101` stalled the upgrade.)
final class RequestIDStamp: ChannelOutboundHandler {
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// The id the router gave the upgrade request being answered, until an answer takes it.
    private var upgradeRequestID: String?
    /// The router's answer to a refused upgrade, until it replaces the library's bare 400.
    private var refusal: (head: HTTPResponse, body: ByteBuffer)?
    /// Whether the connection is a WebSocket now: what is written is frames, not HTTP.
    private var upgraded = false

    /// Remembers `id`, the router's id for an upgrade request on `channel`, for the answer that
    /// hummingbird-websocket writes itself when the router refuses the upgrade.
    ///
    /// The router runs before that answer is written, and this hop to the event loop is queued
    /// ahead of it.
    static func remember(_ id: String, on channel: any Channel) {
        channel.eventLoop.execute {
            (try? channel.pipeline.syncOperations.handler(type: RequestIDStamp.self))?.upgradeRequestID = id
        }
    }

    /// Remembers the router's answer to an upgrade request on `channel` that it refused (a 401
    /// for a bad token, a 403 for an API key, …), to be written instead of hummingbird-websocket's
    /// bare 400. Queued on the event loop ahead of that 400, as ``remember(_:on:)`` is.
    static func answerRefusedUpgrade(with head: HTTPResponse, body: ByteBuffer, on channel: any Channel) {
        channel.eventLoop.execute {
            (try? channel.pipeline.syncOperations.handler(type: RequestIDStamp.self))?.refusal = (head, body)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !upgraded, case .head(var head) = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        // The library's answer to the refused upgrade is a 400 without a request id: every answer
        // of the router has one (RequestIDMiddleware), so the router's own answer to a request
        // with an `Upgrade` header that went the plain HTTP way is never taken for it.
        if let refusal, head.status == .badRequest, !head.headers.contains(name: RequestIDs.header.rawName) {
            // Its end (`.end`) follows as it is.
            self.refusal = nil
            upgradeRequestID = nil
            var fields = refusal.head.headerFields
            fields[.contentLength] = String(refusal.body.readableBytes)
            fields[.connection] = "close"
            var answer = HTTPResponseHead(version: head.version, status: .init(statusCode: refusal.head.status.code))
            for field in fields { answer.headers.add(name: field.name.rawName, value: field.value) }
            context.write(wrapOutboundOut(.head(answer)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(refusal.body))), promise: promise)
            return
        }
        if !head.headers.contains(name: RequestIDs.header.rawName) {
            head.headers.add(name: RequestIDs.header.rawName, value: upgradeRequestID ?? RequestID().description)
        }
        upgradeRequestID = nil
        refusal = nil
        upgraded = head.status == .switchingProtocols
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}

@available(*, unavailable)
extension RequestIDStamp: Sendable {}

extension Response {
    /// The body's bytes, written out: the router's error answers are one JSON buffer.
    ///
    /// - Parameter limit: the most bytes kept; what is past it is dropped.
    consuming func collectedBody(limit: Int) async throws -> ByteBuffer {
        let sink = CollectedBody(limit: limit)
        try await body.write(CollectingBodyWriter(sink: sink))
        return sink.buffer
    }
}

/// Where ``CollectingBodyWriter`` puts a body (a writer is handed over by value).
private final class CollectedBody {
    let limit: Int
    var buffer = ByteBuffer()

    init(limit: Int) {
        self.limit = limit
    }
}

/// A response body writer that keeps what it is given, up to a limit.
private struct CollectingBodyWriter: ResponseBodyWriter {
    let sink: CollectedBody

    mutating func write(_ piece: ByteBuffer) async throws {
        var piece = piece
        let room = max(0, sink.limit - sink.buffer.readableBytes)
        if let kept = piece.readSlice(length: min(room, piece.readableBytes)) { sink.buffer.writeImmutableBuffer(kept) }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
