import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// One HTTP/2 connection of a pool: the channel, and the table of its streams, which reports the
/// connection-level frames the pool acts on (the peer's SETTINGS and GOAWAY).
final class HTTP2PoolConnection: Sendable {
    /// What the connection reports to its pool, on its event loop.
    enum Event: Sendable {
        /// The peer's SETTINGS: its stream limit now (`nil` when the frame does not set it).
        case settings(maxConcurrentStreams: Int?)
        /// The peer is going away (or this connection's stream ids ran out); streams above
        /// `lastStreamID` were not processed.
        case goAway(lastStreamID: Int32)
        /// The connection closed (said by its stream table as it goes inactive, and again when
        /// the channel's close completes; the pool acts on the first).
        case closed
    }

    let channel: any Channel
    private let streams: NIOLoopBound<HTTP2StreamTable>

    private init(channel: any Channel, streams: HTTP2StreamTable) {
        self.channel = channel
        self.streams = NIOLoopBound(streams, eventLoop: channel.eventLoop)
    }

    /// Opens a connection: TCP, TLS with ALPN `h2`, the HTTP/2 preface. The future succeeds once
    /// the peer's first SETTINGS frame has arrived, and fails with the reason (TCP, TLS, ALPN, or
    /// no SETTINGS within `connectTimeout`) otherwise.
    ///
    /// The HTTP/2 handler is in the pipeline before the TLS handshake ends, so a server preface
    /// that arrives with the handshake's last flight is never missed. `onOpen` runs (on the event
    /// loop) before any frame is read, so the pool knows the connection when its SETTINGS come.
    /// `onStreamsClosed` gives back the slots of streams NIO has closed; `onRetire` says why a
    /// connection closes itself (silent, or failed by NIO; see ``HTTP2StreamTable``).
    ///
    /// The pipeline: TLS, the ALPN check, ``HTTP2FrameGuard`` on the decrypted bytes, NIO's HTTP/2
    /// handler (which tells ``HTTP2GoAwayWatcher`` of every frame it writes), the stream table.
    static func connect(
        to endpoint: HTTP2Endpoint, on loop: any EventLoop, connectTimeout: TimeAmount, liveness: HTTP2StreamTable.Liveness,
        maxStreams: Int,
        onOpen: @escaping @Sendable (HTTP2PoolConnection) -> Void, onPing: @escaping @Sendable () -> Void,
        onRetire: @escaping @Sendable (String) -> Void,
        onEvent: @escaping @Sendable (ObjectIdentifier, Event) -> Void,
        onStreamsClosed: @escaping @Sendable (ObjectIdentifier, Int) -> Void
    ) -> EventLoopFuture<HTTP2PoolConnection> {
        let (sslContext, serverName) = (endpoint.sslContext, endpoint.serverName)
        let ready = loop.makePromise(of: HTTP2PoolConnection.self)
        let readiness = Readiness(promise: ready)
        let timeout = loop.scheduleTask(in: connectTimeout) {
            readiness.settle(.failure(NoSettings(timeout: connectTimeout)))
        }
        ready.futureResult.whenComplete { result in
            timeout.cancel()
            if case .failure = result, let channel = readiness.connection?.channel { channel.close(promise: nil) }
        }
        ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                    try sync.addHandler(ALPNCheck(readiness: readiness))
                    let streams = HTTP2StreamTable(authority: endpoint.authority, liveness: liveness)
                    try sync.addHandler(HTTP2FrameGuard(streams: streams))
                    try sync.addHandler(
                        NIOHTTP2Handler(
                            mode: .client, frameDelegate: HTTP2GoAwayWatcher(streams: NIOLoopBound(streams, eventLoop: channel.eventLoop)),
                            connectionConfiguration: Self.connectionConfiguration(maxStreams: maxStreams),
                            streamConfiguration: Self.streamConfiguration))
                    let connection = HTTP2PoolConnection(channel: channel, streams: streams)
                    let id = ObjectIdentifier(connection)
                    streams.onEvent = { event in
                        if case .settings = event { readiness.settle(.success(connection)) }
                        onEvent(id, event)
                    }
                    streams.onStreamsClosed = { count in onStreamsClosed(id, count) }
                    streams.onPing = onPing
                    streams.onRetire = onRetire
                    try sync.addHandler(streams)
                    readiness.connection = connection
                    onOpen(connection)
                    channel.closeFuture.whenComplete { _ in
                        readiness.settle(.failure(ChannelError.ioOnClosedChannel))
                        onEvent(id, .closed)
                    }
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .whenFailure { readiness.settle(.failure($0)) }
        return ready.futureResult
    }

    /// What this client announces: streams the server may open (none are expected; pushes are
    /// refused by `enablePush`) and a header list limit.
    ///
    /// NIO ignores frames on a stream this client reset only while the stream is among the last
    /// `maximumRecentlyResetStreams` it reset; any later answer is a connection error that fails
    /// every stream. A connection can time out all of its streams at once (a peer that stalls),
    /// so it remembers twice as many as it can have open. NIO's glitch limit (200 stream errors
    /// over a connection's life, then the connection is failed) is a server's defence against
    /// abusive clients; a push connection lives for hours and talks only to its service, so it is
    /// raised out of reach.
    private static func connectionConfiguration(maxStreams: Int) -> NIOHTTP2Handler.ConnectionConfiguration {
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
            HTTP2Setting(parameter: .enablePush, value: 0),
        ]
        configuration.maximumRecentlyResetStreams = max(2 * maxStreams, 32)
        configuration.maximumConnectionGlitches = 1 << 30
        return configuration
    }

    /// A server may reset every stream right after answering it (RFC 9113 §8.1: nginx does, when
    /// it answers before reading the body). NIO's rapid-reset guard, meant for servers, would count
    /// those and kill the connection after 200 within 30 s. It keeps one entry per counted frame,
    /// so it is widened (400,000 a second) rather than unbounded.
    private static let streamConfiguration: NIOHTTP2Handler.StreamConfiguration = {
        var configuration = NIOHTTP2Handler.StreamConfiguration()
        configuration.streamResetFrameRateLimit.maximumCount = 20_000
        configuration.streamResetFrameRateLimit.windowLength = .milliseconds(50)
        configuration.streamErrorRateLimit.maximumCount = 20_000
        configuration.streamErrorRateLimit.windowLength = .milliseconds(50)
        return configuration
    }()

    /// No SETTINGS frame came from the server in time (a TLS handshake or preface that stalled).
    struct NoSettings: Error, CustomStringConvertible {
        var timeout: TimeAmount
        var description: String { "no HTTP/2 SETTINGS from the server within \(timeout.nanoseconds / 1_000_000) ms" }
    }

    /// Opens a stream for each request, in order; each one's `ended` says how its stream ended.
    func start(_ starts: [HTTP2StreamStart]) {
        if channel.eventLoop.inEventLoop {
            streams.value.open(starts)
        } else {
            channel.eventLoop.execute { self.streams.value.open(starts) }
        }
    }

    /// Closes the connection (in-flight streams end as `connectionLost`).
    func close() {
        channel.close(promise: nil)
    }
}

/// Settles a connection's readiness once: the first SETTINGS, or the first failure. Touched only
/// on the connection's event loop.
private final class Readiness: @unchecked Sendable {
    private let promise: EventLoopPromise<HTTP2PoolConnection>
    private var settled = false
    /// The connection, once the pipeline is built.
    var connection: HTTP2PoolConnection?

    init(promise: EventLoopPromise<HTTP2PoolConnection>) {
        self.promise = promise
    }

    func settle(_ result: Result<HTTP2PoolConnection, any Error>) {
        promise.futureResult.eventLoop.preconditionInEventLoop()
        guard !settled else { return }
        settled = true
        promise.completeWith(result)
    }
}

/// Checks that the TLS handshake chose HTTP/2, and reports TLS failures, so a server that does not
/// offer `h2` (or a certificate that does not verify) fails the connect at once with its reason.
private final class ALPNCheck: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    /// The server did not agree to HTTP/2 during the TLS handshake.
    struct NotHTTP2: Error, CustomStringConvertible {
        var negotiated: String?
        var description: String { "the server did not negotiate HTTP/2 (ALPN: \(negotiated ?? "none"))" }
    }

    private let readiness: Readiness

    init(readiness: Readiness) {
        self.readiness = readiness
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent, negotiated != "h2" {
            readiness.settle(.failure(NotHTTP2(negotiated: negotiated)))
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        readiness.settle(.failure(error))
        context.fireErrorCaught(error)
    }
}

@available(*, unavailable)
extension ALPNCheck: Sendable {}
