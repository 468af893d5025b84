import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

extension FCMSimulator {
    /// How much of a request body is read; FCM bodies are a few KiB.
    static let maximumBody = 256 * 1024

    /// A client TLS configuration that trusts only this simulator's certificate.
    ///
    /// - Parameter http2: offer `h2` first (as Google's clients do); `false` offers HTTP/1.1 only.
    /// - Throws: if the certificate does not parse.
    public func makeClientTLSConfiguration(http2: Bool = true) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = http2 ? ["h2", "http/1.1"] : ["http/1.1"]
        return tls
    }

    /// TLS 1.2+, ALPN `h2` and `http/1.1`.
    func makeServerTLSContext() throws -> NIOSSLContext {
        let certificate = try NIOSSLCertificate(bytes: serverCertificate.certificateDER, format: .der)
        let key = try NIOSSLPrivateKey(bytes: Array(serverCertificate.privateKeyPEM.utf8), format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(certificate)], privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2", "http/1.1"]
        return try NIOSSLContext(configuration: tls)
    }

    /// The listening socket's bootstrap: TLS, then HTTP/2 if ALPN chose `h2`, else HTTP/1.1.
    func makeServerBootstrap(tlsContext: NIOSSLContext) -> ServerBootstrap {
        ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                let connectionID = connectionAccepted(channel)
                channel.closeFuture.whenComplete { [self] _ in connectionClosed(connectionID) }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tlsContext))
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { [self] channel in
                            channel.eventLoop.makeCompletedFuture {
                                var connection = NIOHTTP2Handler.ConnectionConfiguration()
                                connection.initialSettings = [
                                    HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000),
                                    HTTP2Setting(parameter: .maxHeaderListSize, value: 65_536),
                                ]
                                _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                                    mode: .server, connectionConfiguration: connection, streamConfiguration: .init()
                                ) { [self] stream in
                                    stream.eventLoop.makeCompletedFuture {
                                        try stream.pipeline.syncOperations.addHandlers([
                                            HTTP2FramePayloadToHTTP1ServerCodec(),
                                            FCMRequestHandler(simulator: self, connectionID: connectionID),
                                        ])
                                    }
                                }
                                try channel.pipeline.syncOperations.addHandler(FCMConnectionErrorHandler(logger: configuration.logger))
                            }
                        },
                        http1ChannelConfigurator: { [self] channel in
                            channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                                try channel.pipeline.syncOperations.addHandler(FCMRequestHandler(simulator: self, connectionID: connectionID))
                            }
                        })
                }
            }
    }
}

/// Closes a connection on TLS and socket errors; HTTP/2 stream errors are left to `NIOHTTP2Handler`.
final class FCMConnectionErrorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("FCM simulator connection error", metadata: ["error": "\(error)"])
        if error is any NIOHTTP2Error { return }
        context.close(promise: nil)
    }
}

/// One complete HTTP request as the handler collected it.
struct FCMHTTPRequest {
    var method: String
    var path: String
    /// Names lowercased, in arrival order.
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    var truncated: Bool

    /// The first value of a header.
    func header(_ name: String) -> String? {
        headers.first(where: { $0.name == name })?.value
    }
}

/// What the simulator decided to do with a request.
enum FCMSimulatedAnswer {
    case respond(status: Int, headers: [(String, String)], body: [UInt8])
    case stall
    indirect case delayed(Duration, FCMSimulatedAnswer)
}

/// Handles one HTTP/2 stream or HTTP/1.1 connection: collects each request, asks the simulator
/// for the answer and writes it.
final class FCMRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let simulator: FCMSimulator
    private let connectionID: Int
    private var request: FCMHTTPRequest?
    private var version = HTTPVersion.http1_1
    private var removed = false

    init(simulator: FCMSimulator, connectionID: Int) {
        self.simulator = simulator
        self.connectionID = connectionID
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            version = head.version
            var headers: [(name: String, value: String)] = []
            for (name, value) in head.headers {
                headers.append((name.lowercased(), value))
            }
            request = FCMHTTPRequest(method: head.method.rawValue, path: head.uri, headers: headers, body: [], truncated: false)
        case .body(let buffer):
            guard var request else { return }
            let room = max(0, FCMSimulator.maximumBody - request.body.count)
            request.body += buffer.readableBytesView.prefix(room)
            request.truncated = request.truncated || buffer.readableBytes > room
            self.request = request
        case .end:
            guard let request else { return }
            self.request = nil
            let answer = simulator.answer(request, connectionID: connectionID)
            respond(answer, context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func respond(_ answer: FCMSimulatedAnswer, context: ChannelHandlerContext) {
        switch answer {
        case .stall:
            return
        case .delayed(let delay, let answer):
            let (seconds, attoseconds) = delay.components
            let nanoseconds = max(0, min(seconds, 86_400)) * 1_000_000_000 + attoseconds / 1_000_000_000
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(nanoseconds)) {
                self.respond(answer, context: context)
            }
        case .respond(let status, let extraHeaders, let body):
            guard !removed else { return }
            var headers = HTTPHeaders(extraHeaders)
            headers.add(name: "content-length", value: String(body.count))
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: headers)
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
