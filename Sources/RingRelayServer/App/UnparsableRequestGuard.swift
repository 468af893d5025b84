import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1

/// Answers `400 invalid_request` and closes a connection whose first request the HTTP/1 parser
/// refused (a raw non-UTF-8 byte in the request line, say).
///
/// The listener checks every connection's first request for a WebSocket upgrade before Hummingbird
/// sees it, and that check neither answers nor closes when the parser fails: the connection stayed
/// open with no answer, forever. The guard sits right after the parser; the first request it sees
/// parsed means the check is past it, so it removes itself (later parse errors on the connection
/// are Hummingbird's, which answers 400 and closes).
final class UnparsableRequestGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    static let body = #"{"error":{"code":"invalid_request","message":"The request could not be parsed as HTTP/1.1."}}"#

    private var answered = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError else { return context.fireErrorCaught(error) }
        guard !answered else { return }
        answered = true
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(Self.body.utf8.count))
        headers.add(name: "Connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .badRequest, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: Self.body)))), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in loopBound.value.close(promise: nil) }
    }
}

/// The server's listener: HTTP/1.1 with the WebSocket upgrade, the same router answering both,
/// and every connection's first request guarded by ``UnparsableRequestGuard``.
struct GuardedHTTP1WebSocketChannel: ServerChildChannel {
    let inner: HTTP1WebSocketUpgradeChannel

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1WebSocketUpgradeChannel.Value> {
        inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let parser = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(UnparsableRequestGuard(), position: .after(parser))
            return value
        }
    }

    func handle(value: HTTP1WebSocketUpgradeChannel.Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with the WebSocket upgrade answered by `router`, unparsable first requests answered 400.
    static func guardedHTTP1WebSocketUpgrade<Context: WebSocketRequestContext>(
        router: Router<Context>, configuration: HTTP1WebSocketUpgradeChannel.Configuration
    ) -> HTTPServerBuilder {
        let webSocketResponder = router.buildResponder()
        return .init { responder in
            GuardedHTTP1WebSocketChannel(
                inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder, configuration: configuration))
        }
    }
}

@available(*, unavailable)
extension UnparsableRequestGuard: Sendable {}
