import Crypto
import Foundation
import Logging
import Metrics
import NIOCore
import NIOSSL
import RingRelayCore
import ServiceLifecycle
import Synchronization

/// The answer to one attempt, before any retry decision.
public struct APNsAttempt: Sendable, Hashable {
    /// HTTP status; `nil` when no answer arrived.
    public var status: Int?
    /// APNs reason, or `Timeout` / `ConnectionError` / a local validation reason.
    public var reason: String?
    /// The `apns-id` APNs answered with (or that was sent).
    public var apnsID: String
    /// APNs `timestamp` of a 410.
    public var timestamp: Date?
    /// Time from sending to the answer.
    public var latency: Duration
}

/// RingRelay's APNs client: HTTP/2 over TLS, one connection per credential and environment.
///
/// Each connection (``APNsConnection``) carries many pushes as multiplexed streams, one HEADERS
/// and one DATA frame each; a dropped connection or GOAWAY fails only its in-flight streams, which
/// ``push(_:credential:environment:environmentIsCertain:deadline:)`` retries (same `apns-id`) on a
/// fresh connection. Provider tokens come from one ``APNsTokenManager`` shared by
/// all connections. Run it as a `Service`: on shutdown it closes every connection.
public final class APNsClient: Service, Sendable {
    private struct PoolKey: Hashable {
        var environment: PushEnvironment
        /// The authentication material itself: new credentials get new connections, as APNs
        /// binds a connection to the team and key of its first push.
        var authentication: APNsCredential.Authentication
    }

    private struct Pool {
        var connection: APNsConnection
        var lastUsed: ContinuousClock.Instant
    }

    private let configuration: APNsConfiguration
    private let clock: any WallClock
    private let logger: Logger
    private let metrics: APNsMetrics
    private let tokens: APNsTokenManager
    private let extraTrustRoots: [NIOSSLCertificate]
    /// The pools, or `nil` once the client is shut down (late pushes then fail instead of
    /// opening pools nobody would close).
    private let pools = Mutex<[PoolKey: Pool]?>([:])
    private let sleep: @Sendable (Duration) async throws -> Void

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - configuration: endpoints, trust roots, timeouts.
    ///   - clock: time source for provider tokens and ring deadlines.
    ///   - logger: for connection events; pushes are logged by the caller.
    ///   - metricsFactory: where push metrics go.
    ///   - sleep: how back-off waits (tests pass a recorder).
    /// - Throws: when `extraTrustRootsFile` cannot be read as PEM certificates.
    public init(
        configuration: APNsConfiguration, clock: any WallClock, logger: Logger, metricsFactory: any MetricsFactory,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) throws {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        let metrics = APNsMetrics(factory: metricsFactory)
        self.metrics = metrics
        self.tokens = APNsTokenManager(clock: clock, onMint: { metrics.tokenMinted() })
        self.sleep = sleep
        if let file = configuration.extraTrustRootsFile {
            do {
                extraTrustRoots = try NIOSSLCertificate.fromPEMFile(file)
            } catch {
                throw RingRelayError(
                    .unavailable, code: "push_ca_file_unusable", "Cannot read PEM certificates from \(file).", underlying: error)
            }
        } else {
            extraTrustRoots = []
        }
    }

    // MARK: Service

    public func run() async throws {
        // Close pools nobody used for a while (replaced credentials), until shutdown.
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(60))
                self.closeIdlePools(olderThan: self.configuration.poolIdleLifetime)
            }
        }
        await shutdown()
    }

    /// Closes every connection pool, waiting for in-flight pushes. Later pushes fail with `ClientShutDown`.
    public func shutdown() async {
        let all = pools.withLock { pools in
            defer { pools = nil }
            return pools?.values.map(\.connection) ?? []
        }
        for connection in all {
            await connection.shutdown()
        }
    }

    private func closeIdlePools(olderThan lifetime: Duration) {
        let now = ContinuousClock.now
        let stale = pools.withLock { pools in
            let stale = pools?.filter { now - $0.value.lastUsed > lifetime } ?? [:]
            for key in stale.keys { pools?.removeValue(forKey: key) }
            return stale.values.map(\.connection)
        }
        for connection in stale {
            Task { await connection.shutdown() }
        }
    }

    // MARK: Sending

    /// Sends a push, retrying transient failures with jittered back-off while `deadline` allows.
    ///
    /// Never throws: every failure is a ``PushOutcome`` with a disposition.
    /// - Parameters:
    ///   - request: the built request; its `apns-id` is kept across retries.
    ///   - credential: the account's APNs credential.
    ///   - environment: where the token belongs.
    ///   - environmentIsCertain: whether the app stated the environment (see ``APNsDispositionRules``).
    ///   - deadline: no attempt starts after this (the ring's end).
    public func push(
        _ request: APNsRequest, credential: APNsCredential, environment: PushEnvironment, environmentIsCertain: Bool,
        deadline: Date
    ) async -> PushOutcome {
        var attempts = 0
        while true {
            attempts += 1
            let tracked = await sendTracked(request, credential: credential, environment: environment)
            let attempt = tracked.attempt
            var disposition = Self.disposition(of: attempt, environmentIsCertain: environmentIsCertain)
            if disposition == .retry, attempt.reason == APNsReason.expiredProviderToken.description,
                case .token(let teamID, let keyID, let pem) = credential.authentication,
                let sentToken = tracked.sentToken
            {
                let key = APNsSigningKey(teamID: teamID, keyID: keyID, privateKeyPEM: pem)
                // A token younger than 20 minutes called expired means the clocks disagree:
                // minting again would only earn TooManyProviderTokenUpdates.
                if await !tokens.reportExpired(sentToken, for: key) { disposition = .fixConfiguration }
            }
            let backoff = Self.backoff(attempt: attempts, base: configuration.retryBaseDelay)
            let retryFits = clock.now.addingTimeInterval(backoff.timeInterval) < deadline
            if disposition != .retry || attempts >= configuration.maxAttempts || !retryFits {
                let outcome = PushOutcome(
                    disposition: disposition, status: attempt.status, reason: attempt.reason, providerID: attempt.apnsID,
                    invalidSince: attempt.timestamp, latency: attempt.latency, attempts: attempts)
                metrics.record(outcome, kind: request.kind)
                return outcome
            }
            try? await sleep(backoff)
        }
    }

    /// Sends one attempt and reports what came back, without retrying.
    public func send(_ request: APNsRequest, credential: APNsCredential, environment: PushEnvironment) async -> APNsAttempt {
        await sendTracked(request, credential: credential, environment: environment).attempt
    }

    private func sendTracked(_ request: APNsRequest, credential: APNsCredential, environment: PushEnvironment) async -> TrackedAttempt {
        let start = ContinuousClock.now
        func failure(_ reason: String) -> TrackedAttempt {
            TrackedAttempt(attempt: APNsAttempt(status: nil, reason: reason, apnsID: request.apnsID, timestamp: nil, latency: ContinuousClock.now - start))
        }
        let connection: APNsConnection
        var authorization: String?
        do {
            connection = try pool(for: credential, environment: environment)
            if case .token(let teamID, let keyID, let pem) = credential.authentication {
                authorization = try await tokens.token(for: APNsSigningKey(teamID: teamID, keyID: keyID, privateKeyPEM: pem))
            }
        } catch is ClientShutDown {
            return failure("ClientShutDown")
        } catch {
            logger.error("APNs credential unusable", metadata: ["push.reason": "\(error)"])
            return failure("InvalidCredential")
        }

        var headers = request.headers
        if let authorization { headers.append(("authorization", "bearer " + authorization)) }
        do {
            let response = try await connection.post(
                path: request.path, headers: headers, body: request.payload, timeout: TimeAmount(configuration.requestTimeout))
            let latency = ContinuousClock.now - start
            metrics.recordLatency(latency, kind: request.kind)
            let status = response.status
            let apnsID = response.apnsID ?? request.apnsID
            guard status != 200 else {
                return TrackedAttempt(attempt: APNsAttempt(status: 200, reason: nil, apnsID: apnsID, timestamp: nil, latency: latency))
            }
            let error = try? JSONDecoder().decode(APNsErrorBody.self, from: Data(response.body))
            let attempt = APNsAttempt(
                status: status, reason: error?.reason ?? "HTTP\(status)", apnsID: apnsID,
                timestamp: error?.timestamp.map { Date(timeIntervalSince1970: $0 / 1000) }, latency: latency)
            return TrackedAttempt(attempt: attempt, sentToken: authorization)
        } catch is APNsConnection.Timeout {
            return failure("Timeout")
        } catch is APNsConnection.ShutDown {
            return failure("ClientShutDown")
        } catch {
            logger.debug("APNs connection error", metadata: ["push.reason": "\(error)"])
            return failure("ConnectionError")
        }
    }

    /// Thrown by `pool(for:)` after ``shutdown()``.
    private struct ClientShutDown: Error {}

    /// An attempt and the provider token it carried (kept out of the public value: it is a credential).
    private struct TrackedAttempt {
        var attempt: APNsAttempt
        var sentToken: String?
    }

    private struct APNsErrorBody: Decodable {
        var reason: String
        var timestamp: Double?
    }

    static func disposition(of attempt: APNsAttempt, environmentIsCertain: Bool) -> PushDisposition {
        guard let status = attempt.status else {
            switch attempt.reason {
            case "Timeout", "ConnectionError": return .retry
            case "InvalidCredential": return .fixConfiguration
            default: return .drop
            }
        }
        return APNsDispositionRules.disposition(status: status, reason: attempt.reason.map(APNsReason.init), environmentIsCertain: environmentIsCertain)
    }

    /// Full-jitter exponential back-off: uniformly 0…base·2^(attempt-1).
    static func backoff(attempt: Int, base: Duration) -> Duration {
        let ceiling = base * (1 << min(attempt - 1, 10))
        return .nanoseconds(Int64.random(in: 0...max(1, ceiling.nanoseconds)))
    }

    // MARK: Pools

    private func pool(for credential: APNsCredential, environment: PushEnvironment) throws -> APNsConnection {
        let key = PoolKey(environment: environment, authentication: credential.authentication)
        let existing = try pools.withLock { pools -> APNsConnection? in
            guard pools != nil else { throw ClientShutDown() }
            pools?[key]?.lastUsed = .now
            return pools?[key]?.connection
        }
        if let existing { return existing }
        let connection = try makeConnection(for: credential, environment: environment)
        let winner = pools.withLock { pools -> APNsConnection? in
            guard pools != nil else { return nil }
            if let existing = pools?[key]?.connection { return existing }
            pools?[key] = Pool(connection: connection, lastUsed: .now)
            return connection
        }
        // A connection that lost the race never connected: it opens on first use.
        guard let winner else { throw ClientShutDown() }
        return winner
    }

    private func makeConnection(for credential: APNsCredential, environment: PushEnvironment) throws -> APNsConnection {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if !extraTrustRoots.isEmpty { tls.additionalTrustRoots = [.certificates(extraTrustRoots)] }
        switch credential.authentication {
        case .token:
            break
        case .certificate(let certificatePEM, let privateKeyPEM):
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)).map { .certificate($0) }
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem))
        case .pkcs12(let data, let passphrase):
            let bundle = try NIOSSLPKCS12Bundle(buffer: Array(data), passphrase: Array(passphrase.utf8))
            tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(bundle.privateKey)
        }
        guard let endpoint = URLComponents(string: configuration.endpoint(for: environment)), let host = endpoint.host else {
            throw RingRelayError(.unavailable, code: "apns_endpoint_invalid", "The APNs endpoint \(configuration.endpoint(for: environment)) is not a URL.")
        }
        let metrics = self.metrics
        let keepAlive = TimeAmount(self.configuration.keepAliveInterval)
        let environmentName = environment.rawValue
        return APNsConnection(
            host: host, port: endpoint.port ?? 443, sslContext: try NIOSSLContext(configuration: tls), connectTimeout: .seconds(10)
        ) { channel in
            metrics.connectionOpened(environment: environmentName)
            channel.closeFuture.whenComplete { _ in metrics.connectionClosed(environment: environmentName) }
            try APNsKeepAliveHandler.add(to: channel.pipeline.syncOperations, idleTime: keepAlive, onPing: { metrics.pingSent() })
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        self = .nanoseconds(duration.nanoseconds)
    }
}
