import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// One HTTP/2 connection to an APNs endpoint, written straight on SwiftNIO HTTP/2.
///
/// A push is one stream: a HEADERS frame and a DATA frame ending the stream, written and flushed
/// together, and the answer's HEADERS (and DATA, for an error body) read back by a small handler
/// on the stream. The connection opens on first use and again after it closes or APNs sends
/// GOAWAY; streams beyond APNs' concurrency limit wait in NIO's HTTP/2 stream buffer.
final class APNsConnection: Sendable {
    /// What APNs answered on a stream.
    struct Response: Sendable {
        var status: Int
        var apnsID: String?
        var body: [UInt8]
    }

    /// The stream got no answer within the request timeout.
    struct Timeout: Error {}
    /// The connection ended before the stream's answer.
    struct Closed: Error {}
    /// The connection was shut down for good.
    struct ShutDown: Error {}

    private final class Open: Sendable {
        let channel: any Channel
        let multiplexer: NIOHTTP2Handler.StreamMultiplexer
        /// Set by GOAWAY: streams in flight may still finish, new ones go to a new connection.
        let goingAway = Atomic<Bool>(false)

        init(channel: any Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer) {
            self.channel = channel
            self.multiplexer = multiplexer
        }

        var isUsable: Bool { channel.isActive && !goingAway.load(ordering: .relaxed) }
    }

    private enum State {
        case idle
        case connecting(EventLoopFuture<Open>)
        case open(Open)
        case shutDown
    }

    private let host: String
    private let port: Int
    private let authority: String
    private let sslContext: NIOSSLContext
    private let connectTimeout: TimeAmount
    private let group: any EventLoopGroup
    /// Called with each new connection's channel once HTTP/2 is set up (keep-alive, metrics).
    private let configure: @Sendable (any Channel) throws -> Void
    private let state = Mutex(State.idle)

    init(
        host: String, port: Int, sslContext: NIOSSLContext, connectTimeout: TimeAmount,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, configure: @escaping @Sendable (any Channel) throws -> Void
    ) {
        self.host = host
        self.port = port
        self.authority = port == 443 ? host : "\(host):\(port)"
        self.sslContext = sslContext
        self.connectTimeout = connectTimeout
        self.group = group
        self.configure = configure
    }

    /// Sends a POST to `path` and waits for APNs' answer.
    ///
    /// - Throws: ``Timeout`` after `timeout`; ``Closed`` or a NIO error when the connection failed;
    ///   ``ShutDown`` after ``shutdown()``.
    func post(path: String, headers: [(String, String)], body: [UInt8], timeout: TimeAmount) async throws -> Response {
        let open = try await connection().get()
        let promise = open.channel.eventLoop.makePromise(of: Response.self)
        var fields = HPACKHeaders()
        fields.reserveCapacity(headers.count + 4)
        fields.add(name: ":method", value: "POST")
        fields.add(name: ":scheme", value: "https")
        fields.add(name: ":path", value: path)
        fields.add(name: ":authority", value: authority)
        for (name, value) in headers { fields.add(name: name, value: value) }
        let request = APNsStreamHandler.Request(headers: fields, body: body, timeout: timeout)
        open.multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(APNsStreamHandler(request: request, promise: promise))
            }
        }.whenFailure { promise.fail($0) }
        return try await promise.futureResult.get()
    }

    /// Closes the connection; later posts fail with ``ShutDown``.
    func shutdown() async {
        let previous = state.withLock { state in
            defer { state = .shutDown }
            return state
        }
        let channel: (any Channel)?
        switch previous {
        case .open(let open): channel = open.channel
        case .connecting(let future): channel = try? await future.get().channel
        case .idle, .shutDown: channel = nil
        }
        try? await channel?.close()
    }

    // MARK: Connecting

    private func connection() -> EventLoopFuture<Open> {
        let (future, started) = state.withLock { state -> (EventLoopFuture<Open>, Bool) in
            switch state {
            case .shutDown:
                return (group.next().makeFailedFuture(ShutDown()), false)
            case .open(let open) where open.isUsable:
                return (open.channel.eventLoop.makeSucceededFuture(open), false)
            case .connecting(let future):
                return (future, false)
            case .open, .idle:
                let future = connect(on: group.next())
                state = .connecting(future)
                return (future, true)
            }
        }
        // Outside the lock: a callback that runs at once must not find the lock held.
        if started { future.whenComplete { [weak self] result in self?.connected(result, future: future) } }
        return future
    }

    private func connected(_ result: Result<Open, any Error>, future: EventLoopFuture<Open>) {
        state.withLock { state in
            // Only the attempt still recorded may settle the state (a shutdown may have come first).
            guard case .connecting(let current) = state, current === future else { return }
            switch result {
            case .success(let open): state = .open(open)
            case .failure: state = .idle
            }
        }
    }

    private func connect(on loop: any EventLoop) -> EventLoopFuture<Open> {
        let (sslContext, host, configure) = (self.sslContext, self.host, self.configure)
        // SNI takes names only; an address is checked against the certificate's IP entries.
        let serverName = (try? SocketAddress(ipAddress: host, port: 0)) == nil ? host : nil
        return ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                }
            }
            .connect(host: host, port: port)
            .flatMapThrowing { channel in
                let watcher = GoAwayWatcher()
                let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                    mode: .client, connectionConfiguration: .init(), streamConfiguration: .init(),
                    inboundStreamInitializer: { stream in stream.close() })
                try channel.pipeline.syncOperations.addHandler(watcher)
                try configure(channel)
                let open = Open(channel: channel, multiplexer: multiplexer)
                watcher.onGoAway = { open.goingAway.store(true, ordering: .relaxed) }
                return open
            }
    }
}

/// Marks a connection as going away when APNs sends GOAWAY.
private final class GoAwayWatcher: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    var onGoAway: (@Sendable () -> Void)?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .goAway = unwrapInboundIn(data).payload { onGoAway?() }
        context.fireChannelRead(data)
    }
}

@available(*, unavailable)
extension GoAwayWatcher: Sendable {}

/// One push on its own stream: writes the request when the stream opens, collects the answer.
private final class APNsStreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    struct Request: Sendable {
        var headers: HPACKHeaders
        var body: [UInt8]
        var timeout: TimeAmount
    }

    private let request: Request
    private let promise: EventLoopPromise<APNsConnection.Response>
    private var response = APNsConnection.Response(status: 0, apnsID: nil, body: [])
    private var sent = false
    private var done = false
    private var timeout: Scheduled<Void>?

    init(request: Request, promise: EventLoopPromise<APNsConnection.Response>) {
        self.request = request
        self.promise = promise
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { send(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        send(context: context)
        context.fireChannelActive()
    }

    private func send(context: ChannelHandlerContext) {
        guard !sent else { return }
        sent = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timeout = context.eventLoop.scheduleTask(in: request.timeout) {
            let (handler, context) = loopBound.value
            handler.finish(.failure(APNsConnection.Timeout()))
            // RST_STREAM: APNs may still be working on it, but nobody waits any more.
            context.close(promise: nil)
        }
        context.write(wrapOutboundOut(.headers(.init(headers: request.headers))), promise: nil)
        let body = context.channel.allocator.buffer(bytes: request.body)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            if let status = headers.headers.first(name: ":status").flatMap({ Int($0) }) { response.status = status }
            if let apnsID = headers.headers.first(name: "apns-id") { response.apnsID = apnsID }
            if headers.endStream { finish(.success(response)) }
        case .data(let data):
            if case .byteBuffer(let buffer) = data.data, response.body.count < 16 * 1024 {
                response.body.append(contentsOf: buffer.readableBytesView.prefix(16 * 1024 - response.body.count))
            }
            if data.endStream { finish(.success(response)) }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(APNsConnection.Closed()))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error))
        context.close(promise: nil)
    }

    private func finish(_ result: Result<APNsConnection.Response, any Error>) {
        guard !done else { return }
        done = true
        timeout?.cancel()
        promise.completeWith(result)
    }
}

@available(*, unavailable)
extension APNsStreamHandler: Sendable {}
