import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL

extension FCMSimulator {
    /// How much of a request body is read; FCM bodies are a few KiB.
    static let maximumBody = 256 * 1024

    /// A client TLS configuration that trusts only this simulator's certificate.
    ///
    /// - Parameter http2: offer `h2` first (as Google's clients do); `false` offers HTTP/1.1 only.
    /// - Throws: if the certificate does not parse.
    public func makeClientTLSConfiguration(http2: Bool = true) throws -> TLSConfiguration {
        try listener.clientTLS(protocols: http2 ? ["h2", "http/1.1"] : ["http/1.1"])
    }

    /// Adds the HTTP/2 handler and a request handler per stream to a connection that chose `h2`.
    func configureHTTP2(on channel: any Channel, connectionID: Int) -> EventLoopFuture<Void> {
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
            try channel.pipeline.syncOperations.addHandler(SimulatorConnectionErrorHandler(name: "FCM", logger: configuration.logger))
        }
    }

    /// Adds an HTTP/1.1 server and the request handler to a connection that did not choose `h2`.
    func configureHTTP1(on channel: any Channel, connectionID: Int) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
            try channel.pipeline.syncOperations.addHandler(FCMRequestHandler(simulator: self, connectionID: connectionID))
        }
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
