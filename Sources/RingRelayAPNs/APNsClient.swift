import Crypto
import Foundation
import Logging
import Metrics
import NIOCore
import NIOHPACK
import NIOSSL
import RingRelayHTTP2
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

/// RingRelay's APNs client: HTTP/2 over TLS through one ``HTTP2ConnectionPool`` per credential
/// and environment.
///
/// The pool keeps to APNs' stream limits (one stream until the first answer, then what APNs
/// raises it to), opens more connections for volume, and resends streams APNs refused unprocessed;
/// this client retries the rest per ``PushRetryPolicy``, keeping the `apns-id`. Provider tokens
/// come from one ``APNsTokenManager`` shared by all pools. Run it as a `Service`: on shutdown it
/// closes every connection.
public final class APNsClient: Service, Sendable, DescribedByNameOnly {
    private struct PoolKey: Hashable {
        var environment: PushEnvironment
        /// The authentication material itself: new credentials get new connections, as APNs
        /// binds a connection to the team and key of its first push.
        var authentication: APNsCredential.Authentication

        /// Hashes what tells credentials apart cheaply (the ids, or a certificate's last bytes,
        /// which hold its signature) rather than kilobytes of key material on every push;
        /// equality still compares it all.
        func hash(into hasher: inout Hasher) {
            hasher.combine(environment)
            switch authentication {
            case .token(let teamID, let keyID, _):
                hasher.combine(teamID)
                hasher.combine(keyID)
            case .certificate(let certificatePEM, _):
                hasher.combine(certificatePEM.utf8.count)
                for byte in certificatePEM.utf8.suffix(64) { hasher.combine(byte) }
            case .pkcs12(let data, _):
                hasher.combine(data.count)
                for byte in data.suffix(64) { hasher.combine(byte) }
            }
        }
    }

    private struct Pool {
        var connections: HTTP2ConnectionPool
        var lastUsed: ContinuousClock.Instant
    }

    private let configuration: APNsConfiguration
    private let clock: any WallClock
    private let logger: Logger
    /// The pool's failures worth a warning, each at most every 10 s: an outage fails every push.
    private let failureLog = RateLimitedLog(interval: .seconds(10))
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

    /// Closes every connection pool. Later pushes fail with `ClientShutDown`.
    public func shutdown() async {
        let all = pools.withLock { pools in
            defer { pools = nil }
            return pools?.values.map(\.connections) ?? []
        }
        for pool in all {
            await pool.shutdown()
        }
    }

    private func closeIdlePools(olderThan lifetime: Duration) {
        let now = ContinuousClock.now
        let stale = pools.withLock { pools in
            let stale = pools?.filter { now - $0.value.lastUsed > lifetime } ?? [:]
            for key in stale.keys { pools?.removeValue(forKey: key) }
            return stale.values.map(\.connections)
        }
        for pool in stale {
            Task { await pool.shutdown() }
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
        let policy = PushRetryPolicy(maxAttempts: configuration.maxAttempts, baseDelay: configuration.retryBaseDelay)
        let outcome = await policy.run(deadline: deadline, clock: clock, sleep: sleep) { _ in
            let tracked = await sendTracked(request, credential: credential, environment: environment, deadline: deadline)
            let attempt = tracked.attempt
            var disposition = Self.disposition(of: attempt, environmentIsCertain: environmentIsCertain)
            if disposition == .retry, attempt.reason == APNsReason.expiredProviderToken.description,
                case .token(let teamID, let keyID, let pem) = credential.authentication,
                let sentToken = tracked.sentToken
            {
                let key = APNsSigningKey(teamID: teamID, keyID: keyID, privateKeyPEM: pem)
                // A token younger than 20 minutes called expired means the clocks disagree:
                // minting again would only earn TooManyProviderTokenUpdates.
                if !tokens.reportExpired(sentToken, for: key) { disposition = .fixConfiguration }
            }
            return PushRetryPolicy.Attempt(
                outcome: PushOutcome(
                    disposition: disposition, status: attempt.status, reason: attempt.reason, providerID: attempt.apnsID,
                    invalidSince: attempt.timestamp, latency: attempt.latency),
                connectionLost: tracked.connectionLost)
        }
        metrics.push.record(outcome, kind: request.kind.rawValue)
        return outcome
    }

    /// Sends one attempt and reports what came back, without retrying.
    public func send(_ request: APNsRequest, credential: APNsCredential, environment: PushEnvironment) async -> APNsAttempt {
        let deadline = clock.now.addingTimeInterval(configuration.requestTimeout.timeInterval)
        return await sendTracked(request, credential: credential, environment: environment, deadline: deadline).attempt
    }

    private func sendTracked(
        _ request: APNsRequest, credential: APNsCredential, environment: PushEnvironment, deadline: Date
    ) async -> TrackedAttempt {
        let start = ContinuousClock.now
        func failure(_ reason: String) -> TrackedAttempt {
            TrackedAttempt(attempt: APNsAttempt(status: nil, reason: reason, apnsID: request.apnsID, timestamp: nil, latency: ContinuousClock.now - start))
        }
        let pool: HTTP2ConnectionPool
        var authorization: String?
        do {
            pool = try self.pool(for: credential, environment: environment)
            if case .token(let teamID, let keyID, let pem) = credential.authentication {
                authorization = try tokens.token(for: APNsSigningKey(teamID: teamID, keyID: keyID, privateKeyPEM: pem))
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
            let response = try await pool.send(
                HTTP2Request(path: request.path, headers: headers, body: request.payload, singleUseFields: APNsRequest.singleUseFields),
                timeout: TimeAmount(configuration.requestTimeout), deadline: .after(deadline.timeIntervalSince(clock.now)))
            let latency = ContinuousClock.now - start
            metrics.push.recordLatency(latency, kind: request.kind.rawValue)
            let status = response.status
            let apnsID = response.headers.first(name: "apns-id") ?? request.apnsID
            guard status != 200 else {
                return TrackedAttempt(attempt: APNsAttempt(status: 200, reason: nil, apnsID: apnsID, timestamp: nil, latency: latency))
            }
            let error = try? JSONDecoder().decode(APNsErrorBody.self, from: Data(response.body))
            let attempt = APNsAttempt(
                status: status, reason: error?.reason ?? "HTTP\(status)", apnsID: apnsID,
                timestamp: error?.timestamp.map { Date(timeIntervalSince1970: $0 / 1000) }, latency: latency)
            return TrackedAttempt(attempt: attempt, sentToken: authorization)
        } catch {
            switch error.kind {
            case .timedOut: return failure("Timeout")
            case .queueDeadline:
                // Every connection was full until the deadline (too few connections for the
                // volume), or the push came to the pool too late: the detail says which.
                failureLog.warning("APNs push not sent before its deadline: \(error.cause)", metadata: ["push.reason": .string(error.detail)], logger: logger)
                return failure("Timeout")
            case .shutDown: return failure("ClientShutDown")
            case .connectFailed:
                failureLog.warning("cannot connect to APNs", metadata: ["push.reason": .string(error.detail)], logger: logger)
                return failure("ConnectionError")
            case .refused, .connectionLost:
                logger.debug("APNs connection error", metadata: ["push.reason": .string(error.description)])
                var lost = failure("ConnectionError")
                lost.connectionLost = true
                return lost
            }
        }
    }

    /// Thrown by `pool(for:)` after ``shutdown()``.
    private struct ClientShutDown: Error {}

    /// An attempt and the provider token it carried (kept out of the public value: it is a credential).
    private struct TrackedAttempt {
        /// The connection was lost (or the stream refused too often) before an answer.
        var connectionLost = false
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

    // MARK: Pools

    private func pool(for credential: APNsCredential, environment: PushEnvironment) throws -> HTTP2ConnectionPool {
        let key = PoolKey(environment: environment, authentication: credential.authentication)
        let existing = try pools.withLock { pools -> HTTP2ConnectionPool? in
            guard pools != nil else { throw ClientShutDown() }
            guard let index = pools!.index(forKey: key) else { return nil }
            pools!.values[index].lastUsed = .now
            return pools!.values[index].connections
        }
        if let existing { return existing }
        let created = try makePool(for: credential, environment: environment)
        let winner = pools.withLock { pools -> HTTP2ConnectionPool? in
            guard pools != nil else { return nil }
            if let existing = pools?[key]?.connections { return existing }
            pools?[key] = Pool(connections: created, lastUsed: .now)
            return created
        }
        // A pool that lost the race never connected: it opens connections on first use.
        guard let winner else { throw ClientShutDown() }
        return winner
    }

    private func makePool(for credential: APNsCredential, environment: PushEnvironment) throws -> HTTP2ConnectionPool {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
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
        let url = configuration.endpoint(for: environment)
        let endpoint: HTTP2Endpoint
        do {
            endpoint = try HTTP2Endpoint(url: url, tls: tls)
        } catch let error as HTTP2Endpoint.InvalidURL {
            throw RingRelayError(.unavailable, code: "apns_endpoint_invalid", "The APNs endpoint \(error.url) is not a URL.")
        }
        let (metrics, logger, failureLog) = (self.metrics, self.logger, self.failureLog)
        let environmentName = environment.rawValue
        var pool = HTTP2ConnectionPool.Configuration()
        pool.maxConnections = configuration.maxConnections
        pool.keepAliveInterval = TimeAmount(configuration.keepAliveInterval)
        pool.silenceTimeout = TimeAmount(configuration.connectionSilenceTimeout)
        return HTTP2ConnectionPool(
            endpoint: endpoint, configuration: pool,
            observer: .init(
                connectionOpened: { metrics.connectionOpened(environment: environmentName) },
                connectionClosed: { metrics.connectionClosed(environment: environmentName) },
                pingSent: { metrics.pingSent() },
                connectionRetired: { reason in
                    metrics.connectionRetired()
                    failureLog.warning(
                        "APNs connection closed; its unanswered pushes go again on another", metadata: ["push.reason": .string(reason)],
                        logger: logger)
                }))
    }
}
