import Foundation
import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import RingRelayCore
import Synchronization

/// The TLS listener under both push simulators: the self-signed certificate their clients trust,
/// the listening socket, and the connections it accepted, numbered from 1 and closed at shutdown.
///
/// Each accepted connection gets TLS, then whichever configurator ALPN chose: `h2` or the other.
/// What is spoken on it (APNs, FCM and its token endpoint) is the simulator's.
final class SimulatorListener: Sendable {
    /// Configures an accepted connection after TLS; given the connection's number.
    typealias Configurator = @Sendable (any Channel, Int) -> EventLoopFuture<Void>

    /// The server certificate: P-256, valid for 127.0.0.1, ::1 and localhost.
    let certificate: SelfSignedCertificate
    private let name: String
    private let host: String
    private let requestedPort: Int
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var starting = false
        var port = 0
        var serverChannel: (any Channel)?
        var connections: [Int: any Channel] = [:]
        var accepted = 0
    }

    /// Creates a listener with a freshly generated certificate.
    ///
    /// - Parameters:
    ///   - name: the service it stands in for ("APNs", "FCM"), in the certificate and messages.
    ///   - host: the address to bind.
    ///   - port: the port to bind; 0 picks a free one (read it back from ``port``).
    /// - Throws: if the certificate cannot be generated.
    init(name: String, host: String, port: Int, logger: Logger) throws {
        self.name = name
        self.host = host
        self.requestedPort = port
        self.logger = logger
        self.certificate = try SelfSignedCertificate(commonName: "RingRelay \(name) simulator")
    }

    /// The server's TLS settings: TLS 1.2 or later, the certificate, and `protocols` for ALPN.
    func serverTLS(protocols: [String]) throws -> TLSConfiguration {
        let chain = try NIOSSLCertificate(bytes: certificate.certificateDER, format: .der)
        let key = try NIOSSLPrivateKey(bytes: Array(certificate.privateKeyPEM.utf8), format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(chain)], privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = protocols
        return tls
    }

    /// A client's TLS settings that trust only this listener's certificate.
    func clientTLS(protocols: [String]) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(certificate.certificatePEM.utf8)))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = protocols
        return tls
    }

    /// Binds the listening socket; afterwards ``port`` is the bound port.
    ///
    /// - Parameters:
    ///   - tls: the server's TLS settings (see ``serverTLS(protocols:)``).
    ///   - acceptingAnyClientCertificate: accept whatever client certificate is presented; the
    ///     simulator decides afterwards whether it knows it.
    ///   - h2: configures a connection that negotiated `h2`.
    ///   - other: configures a connection that did not.
    /// - Throws: `RingRelayError` (`simulator_already_started`) on a second call, or the bind error.
    func start(tls: TLSConfiguration, acceptingAnyClientCertificate: Bool, h2: @escaping Configurator, other: @escaping Configurator)
        async throws
    {
        try state.withLock { state in
            guard !state.starting else {
                throw RingRelayError(
                    .conflict, code: "simulator_already_started", "The \(name) simulator was already started; create a new one.")
            }
            state.starting = true
        }
        let context = try NIOSSLContext(configuration: tls)
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                let connectionID = accepted(channel)
                channel.closeFuture.whenComplete { [self] _ in closed(connectionID) }
                return channel.eventLoop.makeCompletedFuture {
                    let handler =
                        acceptingAnyClientCertificate
                        ? NIOSSLServerHandler(context: context, customVerificationCallback: { _, promise in promise.succeed(.certificateVerified) })
                        : NIOSSLServerHandler(context: context)
                    try channel.pipeline.syncOperations.addHandler(handler)
                }.flatMap {
                    channel.configureHTTP2SecureUpgrade(
                        h2ChannelConfigurator: { h2($0, connectionID) }, http1ChannelConfigurator: { other($0, connectionID) })
                }
            }
        let channel = try await bootstrap.bind(host: host, port: requestedPort).get()
        let port = channel.localAddress?.port ?? 0
        state.withLock { state in
            state.serverChannel = channel
            state.port = port
        }
        logger.info("\(name) simulator listening", metadata: ["\(name.lowercased()).simulator.port": "\(port)"])
    }

    /// The bound port (0 before ``start(tls:acceptingAnyClientCertificate:h2:other:)``).
    var port: Int { state.withLock { $0.port } }

    /// The base URL, e.g. `https://127.0.0.1:2197`.
    var url: String {
        let host = host.contains(":") ? "[\(host)]" : host
        return "https://\(host):\(port)"
    }

    /// How many TCP connections were accepted so far.
    var connectionsAccepted: Int { state.withLock { $0.accepted } }

    /// Writes the certificate (PEM) to a file, e.g. for `ringrelay serve --push-ca-file`.
    func writeCertificate(toFile path: String) throws {
        try Data(certificate.certificatePEM.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Stops listening and closes every open connection. Safe to call more than once.
    func shutdown() async {
        let (server, connections) = state.withLock { state in
            defer {
                state.serverChannel = nil
                state.connections.removeAll()
            }
            return (state.serverChannel, Array(state.connections.values))
        }
        try? await server?.close()
        for connection in connections { try? await connection.close() }
    }

    /// Numbers a new connection and remembers it for ``shutdown()``.
    private func accepted(_ channel: any Channel) -> Int {
        state.withLock { state in
            state.accepted += 1
            state.connections[state.accepted] = channel
            return state.accepted
        }
    }

    /// Forgets a closed connection.
    private func closed(_ id: Int) {
        state.withLock { _ = $0.connections.removeValue(forKey: id) }
    }
}

/// Closes a simulator's connection on TLS and socket errors. HTTP/2 errors are left to
/// `NIOHTTP2Handler`, which has already answered them with RST_STREAM (stream errors, e.g. a
/// stream over the concurrency limit) or GOAWAY (connection errors), as the real services keep a
/// connection open when one stream goes wrong.
final class SimulatorConnectionErrorHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame

    private let name: String
    private let logger: Logger

    init(name: String, logger: Logger) {
        self.name = name
        self.logger = logger
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("\(name) simulator connection error", metadata: ["error": "\(error)"])
        if error is any NIOHTTP2Error { return }
        context.close(promise: nil)
    }
}

/// A scripted value with its remaining uses (`nil`: unlimited).
struct Scripted<Value: Sendable>: Sendable {
    var value: Value
    var remaining: Int?
}

extension Scripted {
    /// Takes one use of the value scripted for `key` in `scripts`, forgetting it after its last use.
    static func take<Key: Hashable>(_ key: Key, from scripts: inout [Key: Scripted]) -> Value? {
        guard var scripted = scripts[key] else { return nil }
        if let remaining = scripted.remaining {
            scripted.remaining = remaining - 1
            scripts[key] = remaining > 1 ? scripted : nil
        }
        return scripted.value
    }
}
