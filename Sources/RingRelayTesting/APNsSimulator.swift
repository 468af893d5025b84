import Crypto
import Foundation
import Logging
import NIOCore
import NIOSSL
import RingRelayCore
import Synchronization

/// A local stand-in for Apple's APNs provider API, speaking HTTP/2 over TLS on loopback.
///
/// It enforces the request rules, size limits, status codes and reason strings of
/// `api.push.apple.com`: ALPN `h2` only, `POST /3/device/<hex token>`,
/// the `apns-*` headers, ES256 provider tokens (or registered client certificates), one stream
/// per connection until a token-authenticated push succeeds, and
/// `TooManyProviderTokenUpdates` when a connection changes its token within 20 minutes.
/// Tests script per-device answers with ``setBehaviour(_:forDeviceToken:times:)`` and inspect
/// ``received``.
///
/// ```swift
/// let simulator = try APNsSimulator()
/// simulator.registerSigningKey(teamID: "DEF123GHIJ", keyID: "ABC123DEFG", publicKey: key.publicKey, topics: ["com.example.app"])
/// try await simulator.start()
/// // point the client at simulator.url, trusting simulator.certificatePEM
/// try await simulator.shutdown()
/// ```
public final class APNsSimulator: Sendable {
    /// How the simulator listens and answers.
    public struct Configuration: Sendable {
        /// The address to bind.
        public var host = "127.0.0.1"
        /// The port to bind; 0 picks a free one (read it back from ``APNsSimulator/port``).
        public var port = 0
        /// Adds `apns-unique-id` to successful responses, like Apple's development server.
        public var isDevelopmentEnvironment = false
        /// The source of "now" for provider-token ages and ``ReceivedPush/receivedAt``.
        public var clock: any WallClock = SystemWallClock()
        /// Keeps only the newest this many pushes in ``APNsSimulator/received``; `nil` keeps all.
        public var maximumRecordedPushes: Int? = nil
        /// Called (on a network thread) for every recorded push, e.g. to print it.
        public var onPush: (@Sendable (ReceivedPush) -> Void)? = nil
        /// Where the simulator logs connection-level trouble; silent by default.
        public var logger = Logger(label: "ringrelay.apns-simulator", factory: { _ in SwiftLogNoOpLogHandler() })

        /// Creates the default configuration: 127.0.0.1, a free port, production behaviour.
        public init() {}
    }

    /// A scripted answer for one device token, applied after TLS and HTTP/2 but before validation.
    public enum Behaviour: Sendable, Hashable {
        /// Answer with this APNs status and reason; `timestamp` becomes `"timestamp"` in milliseconds (for 410).
        case respond(status: Int, reason: String, timestamp: Date? = nil)
        /// Read the request and never answer, so the client has to time out.
        case stall
        /// Close the TCP connection as the request's headers arrive, without answering.
        case dropConnection
        /// Answer nothing on this stream; send GOAWAY (last stream id below this stream) with
        /// `{"reason": ...}` as debug data, then close the connection.
        case goAway(reason: String)
        /// Validate and answer normally, after this delay.
        case delay(Duration)
    }

    /// One request as the simulator saw it, with the answer it sent.
    public struct ReceivedPush: Sendable, Hashable {
        /// The device token from `:path` (as sent; empty when the path has none).
        public var deviceToken: String
        /// Request headers, names lowercased, pseudo-headers (`:method`, `:path`, …) included;
        /// a repeated header's values are joined with `,`.
        public var headers: [String: String]
        /// The request body (at most the first 64 KiB).
        public var payload: Data
        /// The HTTP status sent, or 0 when no answer was sent (stall, dropped connection, GOAWAY).
        public var status: Int
        /// The APNs reason sent with an error, the GOAWAY reason, or `nil` for a 200 or no answer.
        public var reason: String?
        /// When the request was complete (for ``Behaviour/dropConnection``: when its headers arrived).
        public var receivedAt: Date
        /// Which TCP connection carried it, numbered from 1 in accept order.
        public var connectionID: Int
        /// The `apns-id` sent back (echoed or generated); `nil` when no answer was sent.
        public var apnsID: String?
    }

    /// The trust anchor for clients: the simulator's self-signed server certificate, PEM encoded.
    public var certificatePEM: String { listener.certificate.certificatePEM }

    let configuration: Configuration
    let listener: SimulatorListener
    let state = Mutex(SimulatorState())

    /// Creates a simulator with a freshly generated self-signed P-256 certificate valid for
    /// 127.0.0.1, ::1 and localhost.
    ///
    /// - Throws: if the certificate cannot be generated.
    public init(configuration: Configuration = .init()) throws {
        self.configuration = configuration
        self.listener = try SimulatorListener(name: "APNs", host: configuration.host, port: configuration.port, logger: configuration.logger)
    }

    /// Binds the listening socket; afterwards ``port`` is the bound port.
    ///
    /// - Throws: `RingRelayError` (`simulator_already_started`) on a second call, or the bind error.
    public func start() async throws {
        try await listener.start(
            tls: try serverTLS(), acceptingAnyClientCertificate: true, h2: { [self] in configureHTTP2(on: $0, connectionID: $1) },
            other: { [self] channel, connectionID in
                // APNs speaks HTTP/2 only: no HTTP/1.1 fallback.
                configuration.logger.debug(
                    "Closing a connection that did not negotiate h2", metadata: ["apns.simulator.connection": "\(connectionID)"])
                return channel.close()
            })
    }

    /// The bound port (0 before ``start()``).
    public var port: Int { listener.port }

    /// The base URL, e.g. `https://127.0.0.1:2197`.
    public var url: String { listener.url }

    /// Writes ``certificatePEM`` to a file, e.g. for `ringrelay serve --push-ca-file`.
    ///
    /// - Throws: the file system's error.
    public func writeCertificate(toFile path: String) throws {
        try listener.writeCertificate(toFile: path)
    }

    /// Allows provider tokens signed by this key (token authentication).
    ///
    /// - Parameters:
    ///   - teamID: the `iss` claim the tokens carry.
    ///   - keyID: the `kid` header the tokens carry.
    ///   - publicKey: verifies the tokens' ES256 signatures.
    ///   - topics: the bundle ids this key may push to (suffixes such as `.voip` are implied).
    public func registerSigningKey(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey, topics: [String]) {
        state.withLock {
            $0.signingKeys[SigningKeyID(teamID: teamID, keyID: keyID)] = RegisteredKey(
                publicKey: publicKey, topics: Set(topics))
        }
    }

    /// Allows provider tokens signed by the key in a `.p8` file's contents (PKCS#8 PEM).
    ///
    /// - Parameter topics: the bundle ids the key may push to; `nil` allows any.
    /// - Throws: `RingRelayError` (`invalid_signing_key`) when the text is not a P-256 private key.
    public func registerSigningKey(teamID: String, keyID: String, p8PEM: String, topics: [String]?) throws {
        let privateKey: P256.Signing.PrivateKey
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: p8PEM)
        } catch {
            throw RingRelayError(
                .badRequest, code: "invalid_signing_key",
                "The key for \(teamID):\(keyID) is not a P-256 private key in PEM form (an APNs AuthKey_*.p8 file).",
                underlying: error)
        }
        state.withLock {
            $0.signingKeys[SigningKeyID(teamID: teamID, keyID: keyID)] = RegisteredKey(
                publicKey: privateKey.publicKey, topics: topics.map(Set.init))
        }
    }

    /// Allows connections that present this client certificate (certificate authentication).
    ///
    /// - Parameters:
    ///   - pem: the certificate, PEM encoded (only the first certificate is used).
    ///   - topics: the bundle ids a client presenting it may push to.
    /// - Throws: `RingRelayError` (`invalid_certificate`) when the PEM holds no certificate.
    public func registerClientCertificate(pem: String, topics: [String]) throws {
        let der: [UInt8]
        do {
            guard let certificate = try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8)).first else {
                throw RingRelayError(.badRequest, code: "invalid_certificate", "No certificate in the PEM text.")
            }
            der = try certificate.toDERBytes()
        } catch {
            throw RingRelayError(
                .badRequest, code: "invalid_certificate",
                "The client certificate is not a PEM-encoded X.509 certificate.", underlying: error)
        }
        state.withLock { $0.clientCertificates[der] = Set(topics) }
    }

    /// Accepts any well-formed ES256 provider token from an unregistered key, without verifying
    /// its signature (the token's shape and `iat` age are still checked).
    ///
    /// Keys registered with ``registerSigningKey(teamID:keyID:publicKey:topics:)`` are still verified.
    /// - Parameter topics: the bundle ids such tokens may push to; `nil` allows any.
    public func acceptAnyProviderToken(topics: [String]?) {
        state.withLock { $0.anyToken = AnyTokenPolicy(topics: topics.map(Set.init)) }
    }

    /// Scripts the answer to requests for one device token.
    ///
    /// - Parameters:
    ///   - behaviour: what to do instead of (or, for ``Behaviour/delay(_:)``, before) the normal answer.
    ///   - token: the hex device token (case-insensitive).
    ///   - times: how many requests it applies to; `nil` until ``clearBehaviours()``.
    public func setBehaviour(_ behaviour: Behaviour, forDeviceToken token: String, times: Int? = nil) {
        state.withLock { state in
            if let times, times <= 0 {
                state.behaviours[token.lowercased()] = nil
            } else {
                state.behaviours[token.lowercased()] = Scripted(value: behaviour, remaining: times)
            }
        }
    }

    /// Removes every scripted behaviour.
    public func clearBehaviours() {
        state.withLock { $0.behaviours.removeAll() }
    }

    /// Every request that reached request handling, in arrival order, rejected ones included.
    public var received: [ReceivedPush] { state.withLock { $0.received } }

    /// How many TCP connections were accepted so far.
    public var connectionsAccepted: Int { listener.connectionsAccepted }

    /// Forgets ``received`` and every scripted behaviour.
    public func reset() {
        state.withLock {
            $0.received.removeAll()
            $0.behaviours.removeAll()
        }
    }

    /// Stops listening and closes every open connection. Safe to call more than once.
    ///
    /// - Throws: never in practice; closing errors of already-closed channels are ignored.
    public func shutdown() async throws {
        await listener.shutdown()
    }
}

// MARK: - State

/// A registered token-signing key's identity: the JWT's `iss` and `kid`.
struct SigningKeyID: Hashable, Sendable {
    var teamID: String
    var keyID: String
}

/// A registered token-signing key.
struct RegisteredKey: Sendable {
    var publicKey: P256.Signing.PublicKey
    /// `nil`: any topic.
    var topics: Set<String>?
}

/// The "accept any well-formed token" mode of the CLI.
struct AnyTokenPolicy: Sendable {
    var topics: Set<String>?
}

/// Everything mutable about a simulator, kept under one lock.
struct SimulatorState: Sendable {
    var received: [APNsSimulator.ReceivedPush] = []
    var behaviours: [String: Scripted<APNsSimulator.Behaviour>] = [:]
    var signingKeys: [SigningKeyID: RegisteredKey] = [:]
    var clientCertificates: [[UInt8]: Set<String>] = [:]
    var anyToken: AnyTokenPolicy?
}

extension APNsSimulator {
    /// Takes one use of the behaviour scripted for `token`, if any.
    func takeBehaviour(forDeviceToken token: String) -> Behaviour? {
        guard !token.isEmpty else { return nil }
        return state.withLock { Scripted.take(token.lowercased(), from: &$0.behaviours) }
    }

    /// Appends a push to ``received`` and tells ``Configuration/onPush``.
    func record(_ push: ReceivedPush) {
        state.withLock { state in
            state.received.append(push)
            if let limit = configuration.maximumRecordedPushes, state.received.count > limit {
                state.received.removeFirst(state.received.count - max(limit, 0))
            }
        }
        configuration.onPush?(push)
    }

    /// The credentials in force right now.
    var credentials: Credentials {
        state.withLock { Credentials(signingKeys: $0.signingKeys, anyToken: $0.anyToken) }
    }

    /// The topics of a registered client certificate, by its DER bytes.
    func topics(forClientCertificate der: [UInt8]) -> Set<String>? {
        state.withLock { $0.clientCertificates[der] }
    }
}

/// A snapshot of the token credentials, taken once per request.
struct Credentials: Sendable {
    var signingKeys: [SigningKeyID: RegisteredKey]
    var anyToken: AnyTokenPolicy?
}
