import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import RingRelayCore
import Synchronization

/// Answers `400 invalid_request` and closes a connection whose first request the HTTP/1 parser
/// refused (a raw non-UTF-8 byte in the request line, say).
///
/// The listener checks every connection's first request for a WebSocket upgrade before Hummingbird
/// sees it, and that check neither answers nor closes when the parser fails: the connection stayed
/// open with no answer, forever. The guard sits right after the parser; the first request it sees
/// parsed means the check is past it, so it removes itself (``RequestReadGuard`` answers later
/// requests the parser refuses the same way).
///
/// Each refusal is logged through ``ParserRefusals``, at most once a minute: anyone can send
/// requests the parser refuses (a 90 KB header), and each once wrote an `error` line.
final class UnparsableRequestGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// How long the first request's line and headers may take to arrive.
    private let headerTimeout: TimeAmount
    /// Where refusals are logged, at most once a minute.
    private let refusals: ParserRefusals
    private var answered = false
    private var timeout: Scheduled<Void>?

    init(headerTimeout: TimeAmount, refusals: ParserRefusals) {
        self.headerTimeout = headerTimeout
        self.refusals = refusals
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // A socket that sends nothing, or half a request line, is closed (later requests are
        // bounded by the idle timeout of Hummingbird's connection handler).
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        timeout = context.eventLoop.scheduleTask(in: headerTimeout) { loopBound.value.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timeout?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        timeout?.cancel()
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // A graceful shutdown asks each connection to finish its request and close. Before the
        // first request nothing else here hears it (Hummingbird's handler that does comes with
        // that request), so a connection a client opened and never used held the shutdown until
        // the header timeout, past the grace. With no request to finish, it closes now: its input
        // first, which the WebSocket upgrade check waiting for that request answers by closing
        // the connection quietly (a plain close fails the check, which is logged as an error).
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        context.close(mode: .input, promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        guard !answered else { return }
        answered = true
        refusals.record(error)
        let answer = ListenerAnswer.unparsable()
        context.write(wrapOutboundOut(.head(HTTPResponseHead(answer.head))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: answer.body)))), promise: nil)
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            // Input first: the WebSocket upgrade check waiting for this request then ends quietly
            // (its input closed). A plain close fails it as "Inappropriate operation for state",
            // which hummingbird-websocket logs as an error: one line for every refused request.
            loopBound.value.close(mode: .input, promise: nil)
            loopBound.value.close(promise: nil)
        }
    }
}

/// The one log of requests the HTTP/1 parser refused, first requests (``UnparsableRequestGuard``)
/// and later ones (``RequestReadGuard``) alike: one `warning` at most once a minute, whatever
/// the refusal, with how many the minute before left out (`rejections.not_logged`).
///
/// What a client can repeat thousands of times a second must not write a line each time (300
/// requests with a 90 KB header wrote 300 `error` lines in a second). The line carries the
/// parser's own name for the refusal (`headerOverflow`, `invalidCharactersUsed`), never the
/// request's text.
final class ParserRefusals: Sendable {
    private let log = RateLimitedLog(notLoggedKey: "rejections.not_logged")
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Logs `error`, unless its kind was logged within the minute.
    func record(_ error: HTTPParserError) {
        log.warning(
            "refused a request the HTTP/1 parser could not read", metadata: ["http.parser_error": .string("\(error)")], logger: logger)
    }
}

/// The server's listener: HTTP/1.1 with the WebSocket upgrade, the same router answering both,
/// every connection's first request guarded by ``UnparsableRequestGuard``, and every answer
/// given a request id by ``RequestIDStamp``.
struct GuardedHTTP1WebSocketChannel: ServerChildChannel {
    let inner: HTTP1WebSocketUpgradeChannel
    let connections: ConnectionLimiter
    let headerTimeout: TimeAmount
    /// Where the guards log the requests the parser refused.
    let refusals: ParserRefusals

    /// A connection over the caps is closed before anything is read from it.
    struct OverCapacity: Error {}

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<HTTP1WebSocketUpgradeChannel.Value> {
        guard let admitted = connections.admit(channel.remoteAddress) else {
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(OverCapacity())
        }
        channel.closeFuture.whenComplete { _ in connections.release(admitted) }
        let headerTimeout = headerTimeout
        let refusals = refusals
        return inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let parser = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            // Parser, stamp, guard: the guard's answer passes the stamp, which gives it its id.
            try pipeline.addHandler(UnparsableRequestGuard(headerTimeout: headerTimeout, refusals: refusals), position: .after(parser))
            try pipeline.addHandler(RequestIDStamp(), position: .after(parser))
            return value
        }
    }

    func handle(value: HTTP1WebSocketUpgradeChannel.Value, logger: Logger) async {
        // Until its first request, the connection waits for the WebSocket upgrade check, and
        // cancellation does not end that wait: after the grace, the server's cancelled tasks
        // waited for the client. Closing the input ends it, as Hummingbird does for a request in
        // progress (the check then closes the connection).
        let channel = value.channel
        await withTaskCancellationHandler {
            await inner.handle(value: value, logger: logger)
        } onCancel: {
            channel.close(mode: .input, promise: nil)
        }
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with the WebSocket upgrade answered by `router`, unparsable first requests answered 400.
    ///
    /// - Parameter refusals: where requests the parser refused are logged; the same one
    ///   ``RequestReadGuard`` logs later requests' refusals to.
    static func guardedHTTP1WebSocketUpgrade<Context: WebSocketRequestContext>(
        router: Router<Context>, configuration: HTTP1WebSocketUpgradeChannel.Configuration, connections: ConnectionLimiter,
        headerTimeout: Duration, refusals: ParserRefusals
    ) -> HTTPServerBuilder {
        let webSocketResponder = router.buildResponder()
        return .init { responder in
            GuardedHTTP1WebSocketChannel(
                inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder, configuration: configuration),
                connections: connections, headerTimeout: TimeAmount(headerTimeout), refusals: refusals)
        }
    }
}

@available(*, unavailable)
extension UnparsableRequestGuard: Sendable {}

/// Caps concurrent connections, in all and per source address.
///
/// Behind a proxy (`--trust-proxy`) every connection comes from the proxy, so only the global
/// cap applies; the proxy is the place for per-client limits then.
final class ConnectionLimiter: Sendable {
    /// What an admitted connection gives back when it closes.
    struct Admission: Sendable {
        var address: String?
    }

    private let maximum: Int
    private let maximumPerAddress: Int?
    private let counts = Mutex<(total: Int, byAddress: [String: Int])>((0, [:]))

    /// - Parameters:
    ///   - maximumPerAddress: `nil` for no per-address cap.
    init(maximum: Int, maximumPerAddress: Int?) {
        self.maximum = maximum
        self.maximumPerAddress = maximumPerAddress
    }

    /// Counts a new connection, or returns `nil` when a cap is reached.
    func admit(_ remote: SocketAddress?) -> Admission? {
        let address = maximumPerAddress == nil ? nil : remote?.ipAddress
        return counts.withLock { counts in
            guard counts.total < maximum else { return nil }
            if let address, let cap = maximumPerAddress {
                guard counts.byAddress[address, default: 0] < cap else { return nil }
                counts.byAddress[address, default: 0] += 1
            }
            counts.total += 1
            return Admission(address: address)
        }
    }

    /// A connection admitted before has closed.
    func release(_ admission: Admission) {
        counts.withLock { counts in
            counts.total -= 1
            if let address = admission.address {
                let left = counts.byAddress[address, default: 1] - 1
                counts.byAddress[address] = left > 0 ? left : nil
            }
        }
    }

    /// Connections open now.
    var count: Int { counts.withLock { $0.total } }
}
