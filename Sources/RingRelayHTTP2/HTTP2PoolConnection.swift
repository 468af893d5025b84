import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// One HTTP/2 connection of a pool: the channel, its stream multiplexer, and the connection-level
/// frames the pool acts on (the peer's SETTINGS and GOAWAY).
final class HTTP2PoolConnection: Sendable {
    /// What the connection reports to its pool, on its event loop.
    enum Event: Sendable {
        /// The peer's SETTINGS: its stream limit now (`nil` when the frame does not set it).
        case settings(maxConcurrentStreams: Int?)
        /// The peer is going away; streams above `lastStreamID` were not processed.
        case goAway(lastStreamID: Int32)
        /// The connection closed.
        case closed
    }

    let channel: any Channel
    /// The last stream id of the peer's GOAWAY (`Int32.max` until one comes): streams above it
    /// were not processed, however they end.
    let goAwayLastStreamID = Atomic<Int32>(.max)
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    /// `host[:port]`, the `:authority` of every request.
    private let authority: String

    private init(channel: any Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer, authority: String) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.authority = authority
    }

    /// Opens a connection: TCP, TLS with ALPN `h2`, the HTTP/2 preface.
    static func connect(
        to endpoint: HTTP2Endpoint, on loop: any EventLoop, connectTimeout: TimeAmount, keepAlive: TimeAmount?,
        onOpen: @escaping @Sendable (HTTP2PoolConnection) -> Void, onPing: @escaping @Sendable () -> Void, onEvent: @escaping @Sendable (ObjectIdentifier, Event) -> Void
    ) -> EventLoopFuture<HTTP2PoolConnection> {
        let (sslContext, serverName) = (endpoint.sslContext, endpoint.serverName)
        let alpn = loop.makePromise(of: Void.self)
        return ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                    try channel.pipeline.syncOperations.addHandler(ALPNCheck(promise: alpn))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel in
                // HTTP/2 starts once TLS has agreed on it; a server that does not offer `h2` is a
                // configuration problem, reported at once rather than as a slow timeout.
                alpn.futureResult.map { channel }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
            .flatMapThrowing { channel in
                let sync = channel.pipeline.syncOperations
                try sync.removeHandler(sync.handler(type: ALPNCheck.self))
                var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
                // Responses are small; no need for more than the defaults, but never buffer
                // streams inside NIO: the pool opens a stream only when the peer's limit has room.
                connectionConfiguration.initialSettings = [
                    HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
                    HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
                    HTTP2Setting(parameter: .enablePush, value: 0),
                ]
                // A server may reset every stream right after answering it (RFC 9113 §8.1: nginx
                // does, when it answers before reading the body). NIO's rapid-reset guard, meant for
                // servers, would count those and kill the connection after 200 within 30 s. It keeps
                // one entry per counted frame, so it is widened (400,000 a second) rather than unbounded.
                var streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
                streamConfiguration.streamResetFrameRateLimit.maximumCount = 20_000
                streamConfiguration.streamResetFrameRateLimit.windowLength = .milliseconds(50)
                streamConfiguration.streamErrorRateLimit.maximumCount = 20_000
                streamConfiguration.streamErrorRateLimit.windowLength = .milliseconds(50)
                let multiplexer = try sync.configureHTTP2Pipeline(
                    mode: .client, connectionConfiguration: connectionConfiguration, streamConfiguration: streamConfiguration,
                    inboundStreamInitializer: { stream in stream.close() })
                let connection = HTTP2PoolConnection(channel: channel, multiplexer: multiplexer, authority: endpoint.authority)
                let id = ObjectIdentifier(connection)
                try sync.addHandler(
                    HTTP2ConnectionWatcher { event in
                        if case .goAway(let last) = event { connection.goAwayLastStreamID.store(last, ordering: .relaxed) }
                        onEvent(id, event)
                    })
                if let keepAlive { try HTTP2KeepAliveHandler.add(to: sync, idleTime: keepAlive, onPing: onPing) }
                // Registered before any frame is read, so the pool knows the connection when its SETTINGS arrive.
                onOpen(connection)
                channel.closeFuture.whenComplete { _ in onEvent(id, .closed) }
                return connection
            }
    }

    /// Opens a stream for `request` and completes `promise` with how it ended.
    ///
    /// `onClosed` runs when the stream's channel has closed (its slot is free then, in NIO's count too).
    func start(
        _ request: HTTP2Request, timeout: TimeAmount, promise: EventLoopPromise<HTTP2StreamResult>,
        onClosed: @escaping @Sendable () -> Void
    ) {
        var fields = HPACKHeaders()
        fields.reserveCapacity(request.headers.count + 4)
        fields.add(name: ":method", value: request.method)
        fields.add(name: ":scheme", value: "https")
        fields.add(name: ":path", value: request.path)
        fields.add(name: ":authority", value: authority)
        for (name, value) in request.headers { fields.add(name: name, value: value) }
        let body = request.body
        multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(
                    HTTP2StreamHandler(
                        headers: fields, body: body, timeout: timeout, promise: promise,
                        notProcessed: { [weak self] id in Int32(Int(id)) > self?.goAwayLastStreamID.load(ordering: .relaxed) ?? .max }))
            }
        }.whenComplete { result in
            switch result {
            case .success(let stream):
                stream.closeFuture.whenComplete { _ in onClosed() }
            case .failure:
                // The stream never opened, so nothing was sent: the pool may send it elsewhere.
                promise.succeed(.refused)
                onClosed()
            }
        }
    }

    /// Closes the connection (in-flight streams end as `connectionLost`).
    func close() {
        channel.close(promise: nil)
    }
}

/// Waits for the TLS handshake and checks that it chose HTTP/2.
private final class ALPNCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// The server did not agree to HTTP/2 during the TLS handshake.
    struct NotHTTP2: Error, CustomStringConvertible {
        var negotiated: String?
        var description: String { "the server did not negotiate HTTP/2 (ALPN: \(negotiated ?? "none"))" }
    }

    private let promise: EventLoopPromise<Void>
    private var settled = false

    init(promise: EventLoopPromise<Void>) {
        self.promise = promise
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent {
            settle(negotiated == "h2" ? .success(()) : .failure(NotHTTP2(negotiated: negotiated)))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        settle(.failure(error))
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle(.failure(ChannelError.ioOnClosedChannel))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        settle(.failure(ChannelError.ioOnClosedChannel))
    }

    private func settle(_ result: Result<Void, any Error>) {
        guard !settled else { return }
        settled = true
        promise.completeWith(result)
    }
}

@available(*, unavailable)
extension ALPNCheck: Sendable {}

/// Reports the connection-level frames the pool acts on.
private final class HTTP2ConnectionWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let onEvent: (HTTP2PoolConnection.Event) -> Void

    init(onEvent: @escaping (HTTP2PoolConnection.Event) -> Void) {
        self.onEvent = onEvent
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data).payload {
        case .settings(.settings(let settings)):
            // NIO has applied (and acknowledged) these before passing them on.
            let limit = settings.last { $0.parameter == .maxConcurrentStreams }?.value
            onEvent(.settings(maxConcurrentStreams: limit))
        case .goAway(let lastStreamID, _, _):
            onEvent(.goAway(lastStreamID: Int32(Int(lastStreamID))))
        default:
            break
        }
        context.fireChannelRead(data)
    }

}

@available(*, unavailable)
extension HTTP2ConnectionWatcher: Sendable {}

/// Sends an HTTP/2 PING when a connection has seen no traffic for a while, so idle connections
/// stay open (Apple asks providers to keep connections for hours rather than reconnect per burst).
final class HTTP2KeepAliveHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let onPing: @Sendable () -> Void

    init(onPing: @escaping @Sendable () -> Void) {
        self.onPing = onPing
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .all {
            let ping = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: .random(in: .min ... .max)), ack: false))
            context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
            onPing()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Adds the idle watcher (before the HTTP/2 handler, on raw bytes) and the PING sender (after it).
    static func add(to pipeline: ChannelPipeline.SynchronousOperations, idleTime: TimeAmount, onPing: @escaping @Sendable () -> Void) throws {
        let http2 = try pipeline.handler(type: NIOHTTP2Handler.self)
        try pipeline.addHandler(IdleStateHandler(allTimeout: idleTime), position: .before(http2))
        try pipeline.addHandler(HTTP2KeepAliveHandler(onPing: onPing), position: .after(http2))
    }
}
