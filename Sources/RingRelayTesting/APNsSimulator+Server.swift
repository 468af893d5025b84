import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import RingRelayCore

extension APNsSimulator {
    /// SETTINGS_MAX_CONCURRENT_STREAMS before a token-authenticated push has succeeded.
    static let initialStreamLimit: UInt32 = 1
    /// SETTINGS_MAX_CONCURRENT_STREAMS afterwards, and for certificate-authenticated connections.
    static let raisedStreamLimit: UInt32 = 1000
    /// How much of a request body is kept for ``ReceivedPush/payload``.
    static let maximumKeptBody = 64 * 1024

    /// A client TLS configuration that trusts only this simulator's certificate, for AsyncHTTPClient
    /// or a NIO client; optionally presents a client certificate (certificate authentication).
    ///
    /// - Parameter clientCertificate: the certificate and key to present, e.g. one registered with
    ///   ``registerClientCertificate(pem:topics:)``.
    /// - Throws: if the PEM texts do not parse.
    public func makeClientTLSConfiguration(clientCertificate: SelfSignedCertificate? = nil) throws -> TLSConfiguration {
        var tls = try listener.clientTLS(protocols: ["h2"])
        if let clientCertificate {
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(clientCertificate.certificatePEM.utf8))
                .map { .certificate($0) }
            tls.privateKey = .privateKey(
                try NIOSSLPrivateKey(bytes: Array(clientCertificate.privateKeyPEM.utf8), format: .pem))
        }
        return tls
    }

    /// TLS 1.2+, ALPN `h2` only, client certificates requested but optional.
    func serverTLS() throws -> TLSConfiguration {
        var tls = try listener.serverTLS(protocols: ["h2"])
        // Ask for a client certificate without requiring one; the listener accepts any, and request
        // handling decides whether it is a registered one.
        tls.certificateVerification = .optionalVerification
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: listener.certificate.certificateDER, format: .der)])
        return tls
    }

    /// Adds the HTTP/2 handler and the per-stream request handlers to a connection.
    func configureHTTP2(on channel: any Channel, connectionID: Int) -> EventLoopFuture<Void> {
        channel.eventLoop.makeCompletedFuture {
            let peerCertificate = try channel.pipeline.syncOperations.nioSSL_peerCertificate()
            let certificateTopics = try peerCertificate.flatMap { topics(forClientCertificate: try $0.toDERBytes()) }
            let connection = APNsConnectionState(
                id: connectionID, certificateTopics: certificateTopics, presentedCertificate: peerCertificate != nil)
            let boundConnection = NIOLoopBound(connection, eventLoop: channel.eventLoop)

            var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
            connectionConfiguration.initialSettings = [
                HTTP2Setting(
                    parameter: .maxConcurrentStreams,
                    value: Int(connection.streamLimitRaised ? Self.raisedStreamLimit : Self.initialStreamLimit)),
                HTTP2Setting(parameter: .maxHeaderListSize, value: 16_384),
            ]
            _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                mode: .server,
                connectionConfiguration: connectionConfiguration,
                streamConfiguration: .init()
            ) { [self] stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandlers([
                        HTTP2FramePayloadToHTTP1ServerCodec(),
                        APNsStreamHandler(simulator: self, connection: boundConnection.value),
                    ])
                }
            }
            try channel.pipeline.syncOperations.addHandler(SimulatorConnectionErrorHandler(name: "APNs", logger: configuration.logger))
        }
    }
}

/// Handles one HTTP/2 stream (through `HTTP2FramePayloadToHTTP1ServerCodec`): collects the
/// request, applies a scripted behaviour or validates it, records it and answers.
final class APNsStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let simulator: APNsSimulator
    private let connection: APNsConnectionState
    private var request: SimulatedRequest?
    private var behaviour: APNsSimulator.Behaviour?
    private var finished = false
    private var removed = false

    init(simulator: APNsSimulator, connection: APNsConnectionState) {
        self.simulator = simulator
        self.connection = connection
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        removed = true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            requestHeadArrived(head, context: context)
        case .body(let buffer):
            if var request {
                let room = max(0, APNsSimulator.maximumKeptBody - request.body.count)
                request.body += buffer.readableBytesView.prefix(room)
                request.bodyLength += buffer.readableBytes
                self.request = request
            }
        case .end:
            requestComplete(context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A malformed stream (bad pseudo-headers, content-length mismatch): reset it, keep the connection.
        context.close(promise: nil)
    }

    private func requestHeadArrived(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        var request = SimulatedRequest(method: head.method.rawValue, path: head.uri, headers: [], body: [], bodyLength: 0)
        request.headers.append((":method", head.method.rawValue))
        request.headers.append((":path", head.uri))
        for (name, value) in head.headers {
            // The codec turns :authority into host.
            request.headers.append((name == "host" ? ":authority" : name.lowercased(), value))
        }
        self.request = request
        behaviour = simulator.takeBehaviour(forDeviceToken: request.deviceToken)
        if case .dropConnection = behaviour {
            finished = true
            record(request, status: 0, reason: nil, apnsID: nil)
            context.channel.parent?.close(promise: nil)
        }
    }

    private func requestComplete(context: ChannelHandlerContext) {
        guard !finished, let request else { return }
        finished = true
        let now = simulator.configuration.clock.now
        switch behaviour {
        case .respond(var status, var reason, let timestamp):
            if !(200...599).contains(status) {
                // Not an HTTP status a server can send; answer like an APNs failure instead.
                (status, reason) = (500, "InternalServerError")
            }
            let apnsID =
                request.header("apns-id").flatMap { APNsSimulator.isCanonicalUUID($0) ? $0 : nil }
                ?? UUID().uuidString.lowercased()
            let outcome = SimulatedAnswer(
                status: status, reason: status == 200 ? nil : reason, timestamp: timestamp, apnsID: apnsID)
            record(request, status: outcome.status, reason: outcome.reason, apnsID: apnsID)
            answer(outcome, context: context)
        case .stall:
            record(request, status: 0, reason: nil, apnsID: nil)
        case .goAway(let reason):
            record(request, status: 0, reason: reason, apnsID: nil)
            sendGoAway(reason: reason, context: context)
        case .delay(let delay):
            let outcome = simulator.validate(request, connection: connection, now: now)
            record(request, status: outcome.status, reason: outcome.reason, apnsID: outcome.apnsID)
            context.eventLoop.assumeIsolated().scheduleTask(in: Self.timeAmount(delay)) {
                self.answer(outcome, context: context)
            }
        case .dropConnection, nil:
            let outcome = simulator.validate(request, connection: connection, now: now)
            record(request, status: outcome.status, reason: outcome.reason, apnsID: outcome.apnsID)
            answer(outcome, context: context)
        }
    }

    private func record(_ request: SimulatedRequest, status: Int, reason: String?, apnsID: String?) {
        var headers: [String: String] = [:]
        for (name, value) in request.headers {
            headers[name] = headers[name].map { "\($0),\(value)" } ?? value
        }
        simulator.record(
            APNsSimulator.ReceivedPush(
                deviceToken: request.deviceToken, headers: headers, payload: Data(request.body), status: status,
                reason: reason, receivedAt: simulator.configuration.clock.now, connectionID: connection.id,
                apnsID: apnsID))
    }

    /// Writes the response: 200 with an empty body, or the status with `{"reason":…}`.
    private func answer(_ outcome: SimulatedAnswer, context: ChannelHandlerContext) {
        guard !removed else { return }
        if outcome.tokenAuthenticationSucceeded, !connection.streamLimitRaised, let parent = context.channel.parent {
            // Like APNs: more concurrent streams once a token-authenticated push has gone through.
            connection.streamLimitRaised = true
            let settings: HTTP2Settings = [
                HTTP2Setting(parameter: .maxConcurrentStreams, value: Int(APNsSimulator.raisedStreamLimit))
            ]
            parent.writeAndFlush(HTTP2Frame(streamID: .rootStream, payload: .settings(.settings(settings))), promise: nil)
        }

        var headers = HTTPHeaders([("apns-id", outcome.apnsID)])
        let status = HTTPResponseStatus(statusCode: outcome.status)
        if outcome.status == 200 {
            if simulator.configuration.isDevelopmentEnvironment {
                headers.add(name: "apns-unique-id", value: UUID().uuidString.lowercased())
            }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http2, status: status, headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        headers.add(name: "content-type", value: "application/json")
        var body = context.channel.allocator.buffer(capacity: 64)
        body.writeBytes(Self.errorBody(reason: outcome.reason ?? "InternalServerError", timestamp: outcome.timestamp))
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http2, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// GOAWAY with a last stream id below this stream and `{"reason":…}` debug data, then close.
    private func sendGoAway(reason: String, context: ChannelHandlerContext) {
        guard let parent = context.channel.parent else { return }
        let streamID = (try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)) ?? .rootStream
        let lastStreamID = Int(streamID) > 2 ? HTTP2StreamID(Int(streamID) - 2) : .rootStream
        var debugData = context.channel.allocator.buffer(capacity: 64)
        debugData.writeBytes(Self.errorBody(reason: reason, timestamp: nil))
        let frame = HTTP2Frame(
            streamID: .rootStream, payload: .goAway(lastStreamID: lastStreamID, errorCode: .noError, opaqueData: debugData))
        parent.writeAndFlush(frame).whenComplete { _ in parent.close(promise: nil) }
    }

    /// `{"reason":"…"}` or `{"reason":"…","timestamp":<ms>}`.
    static func errorBody(reason: String, timestamp: Date?) -> [UInt8] {
        struct ErrorBody: Encodable {
            var reason: String
            var timestamp: Int64?
        }
        let milliseconds = timestamp.flatMap { Int64(exactly: ($0.timeIntervalSince1970 * 1000).rounded()) }
        let body = ErrorBody(reason: reason, timestamp: milliseconds)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(body)) ?? Data(#"{"reason":"InternalServerError"}"#.utf8))
    }

    /// A `Duration` as a NIO `TimeAmount`, clamped to what fits.
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return .zero }
        guard seconds < Int64.max / 1_000_000_000 - 1 else { return .nanoseconds(.max) }
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
