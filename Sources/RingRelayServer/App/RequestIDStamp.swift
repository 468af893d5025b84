import Hummingbird
import NIOCore
import NIOHTTP1

/// Puts `X-Request-Id` on the answers no route writes, so that every response carries one: the
/// bare 400 hummingbird-websocket sends when the router refused an upgrade (with the id the
/// router gave that request, which its access log line carries), ``UnparsableRequestGuard``'s
/// 400, and Hummingbird's own answer to a later request it cannot parse.
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

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !upgraded, case .head(var head) = unwrapOutboundIn(data) else { return context.write(data, promise: promise) }
        if !head.headers.contains(name: RequestIDs.header.rawName) {
            head.headers.add(name: RequestIDs.header.rawName, value: upgradeRequestID ?? RequestID().description)
        }
        upgradeRequestID = nil
        upgraded = head.status == .switchingProtocols
        context.write(wrapOutboundOut(.head(head)), promise: promise)
    }
}

@available(*, unavailable)
extension RequestIDStamp: Sendable {}
