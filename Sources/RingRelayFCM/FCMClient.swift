import AsyncHTTPClient
import Foundation
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOHPACK
import NIOSSL
import RingRelayHTTP2
import RingRelayCore
import ServiceLifecycle
import Synchronization

/// The answer to one attempt, before any retry decision.
public struct FCMAttempt: Sendable, Hashable {
    /// HTTP status; `nil` when no answer arrived (or no access token could be had).
    public var status: Int?
    /// The FCM error code (`UNREGISTERED`, …), else the RPC status (`UNAUTHENTICATED`, …), or our
    /// own reason (`Timeout`, `ConnectionError`, `OAuthInvalidGrant`, …); `nil` on success.
    public var reason: String?
    /// Google's error message, or the token endpoint's `error_description`.
    public var message: String?
    /// What this answer alone means.
    public var disposition: PushDisposition
    /// The message name FCM returned, `projects/{project_id}/messages/{message_id}`.
    public var messageName: String?
    /// The `Retry-After` FCM asked for.
    public var retryAfter: Duration?
    /// Time from sending to the answer.
    public var latency: Duration
}

/// RingRelay's FCM HTTP v1 client: messages of every account share one ``HTTP2ConnectionPool``
/// to the FCM endpoint (the same HTTP/2 layer as APNs: stream limits kept, refused streams resent,
/// more connections for volume); access tokens from one ``FCMTokenManager``, whose OAuth
/// exchanges go through an AsyncHTTPClient (each service account names its own token endpoint).
///
/// Run it as a `Service`: on shutdown it closes its connections after in-flight sends end; sends
/// after that fail with `ClientShutDown` (dropped) instead of opening a connection nobody would close.
///
/// ```swift
/// let client = try FCMClient(configuration: .init(), clock: SystemWallClock(), logger: logger, metricsFactory: factory)
/// let request = try FCMRequest(token: binding.token, data: ["ringrelay": json], expiresAt: ringEnd, now: Date())
/// let outcome = await client.push(request, credential: credential, deadline: ringEnd)
/// ```
public final class FCMClient: Service, Sendable, DescribedByNameOnly {
    private let configuration: FCMConfiguration
    private let clock: any WallClock
    private let logger: Logger
    /// The pool's failures worth a warning, each at most every 10 s: an outage fails every push.
    private let failureLog = RateLimitedLog(interval: .seconds(10))
    private let metrics: FCMMetrics
    /// For the OAuth token endpoints.
    private let transport: FCMTransport
    /// For messages.
    private let pool: HTTP2ConnectionPool
    /// Internal so tests can wait for a background refresh.
    let tokens: FCMTokenManager
    private let sleep: @Sendable (Duration) async throws -> Void

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - configuration: endpoint, trust roots, timeouts.
    ///   - clock: time source for access tokens, assertions and ring deadlines.
    ///   - logger: for connection and token endpoint events; messages are logged by the caller.
    ///   - metricsFactory: where push metrics go.
    ///   - sleep: how back-off waits (tests pass a recorder).
    /// - Throws: when `extraTrustRootsFile` cannot be read as PEM certificates.
    public init(
        configuration: FCMConfiguration, clock: any WallClock, logger: Logger, metricsFactory: any MetricsFactory,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) throws {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        let metrics = FCMMetrics(factory: metricsFactory)
        self.metrics = metrics
        self.sleep = sleep
        var extraTrustRoots: [NIOSSLCertificate] = []
        if let file = configuration.extraTrustRootsFile {
            do {
                extraTrustRoots = try NIOSSLCertificate.fromPEMFile(file)
            } catch {
                throw RingRelayError(
                    .unavailable, code: "push_ca_file_unusable", "Cannot read PEM certificates from \(file).", underlying: error)
            }
        }
        let transport = FCMTransport(extraTrustRoots: extraTrustRoots, logger: logger)
        self.transport = transport
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if !extraTrustRoots.isEmpty { tls.additionalTrustRoots = [.certificates(extraTrustRoots)] }
        let endpoint: HTTP2Endpoint
        do {
            endpoint = try HTTP2Endpoint(url: configuration.endpoint, tls: tls)
        } catch let error as HTTP2Endpoint.InvalidURL {
            throw RingRelayError(.unavailable, code: "fcm_endpoint_invalid", "The FCM endpoint \(error.url) is not a URL.")
        }
        var poolConfiguration = HTTP2ConnectionPool.Configuration()
        poolConfiguration.maxConnections = configuration.maxConnections
        poolConfiguration.silenceTimeout = TimeAmount(configuration.connectionSilenceTimeout)
        let failureLog = self.failureLog
        pool = HTTP2ConnectionPool(
            endpoint: endpoint, configuration: poolConfiguration,
            observer: .init(
                connectionOpened: {}, connectionClosed: {}, pingSent: {},
                connectionRetired: { reason in
                    failureLog.warning(
                        "FCM connection closed; its unanswered messages go again on another", metadata: ["push.reason": .string(reason)],
                        logger: logger)
                }))
        let timeout = configuration.requestTimeout
        self.tokens = FCMTokenManager(
            clock: clock, refreshMargin: configuration.tokenRefreshMargin, rejectionHoldOff: configuration.rejectedAccountHoldOff,
            exchange: { account, assertion async throws(FCMOAuthError) -> FCMTokenGrant in
                try await FCMOAuthExchange.exchange(assertion, for: account, transport: transport, timeout: timeout, logger: logger)
            },
            onMint: { metrics.tokenMinted() })
    }

    // MARK: Service

    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Closes the connections. Later sends fail with `ClientShutDown`.
    public func shutdown() async {
        await pool.shutdown()
        await transport.shutdown()
    }

    // MARK: Sending

    /// Sends a message, retrying transient failures with jittered back-off while `deadline` allows.
    ///
    /// Never throws: every failure is a ``PushOutcome`` with a disposition. A `Retry-After` is
    /// waited on top of the jittered back-off, and only when the retry still starts before the
    /// deadline. A 401 on an access token older than a minute replaces the token and tries again.
    /// - Parameters:
    ///   - request: the built message.
    ///   - credential: the account's service account.
    ///   - deadline: no attempt starts after this (the ring's end).
    public func push(_ request: FCMRequest, credential: FCMCredential, deadline: Date) async -> PushOutcome {
        let policy = PushRetryPolicy(maxAttempts: configuration.maxAttempts, baseDelay: configuration.retryBaseDelay)
        let outcome = await policy.run(deadline: deadline, clock: clock, sleep: sleep) { _ in
            let tracked = await sendTracked(request, credential: credential, deadline: deadline)
            let attempt = tracked.attempt
            var disposition = attempt.disposition
            if attempt.status == 401, tracked.errorCode == nil, let sentToken = tracked.sentToken {
                // FCM no longer takes this access token (revoked, or expired early). A token minted
                // under a minute ago means the account itself is refused: report, don't mint again.
                disposition = await tokens.reportRejected(sentToken, for: credential) ? .retry : .fixConfiguration
            }
            return PushRetryPolicy.Attempt(
                outcome: PushOutcome(
                    disposition: disposition, status: attempt.status, reason: attempt.reason, providerID: attempt.messageName,
                    latency: attempt.latency),
                retryAfter: attempt.retryAfter, connectionLost: tracked.connectionLost)
        }
        metrics.push.record(outcome, kind: request.kind)
        return outcome
    }

    /// Sends one attempt and reports what came back, without retrying.
    public func send(_ request: FCMRequest, credential: FCMCredential) async -> FCMAttempt {
        await sendTracked(request, credential: credential, deadline: clock.now.addingTimeInterval(configuration.requestTimeout.timeInterval))
            .attempt
    }

    private func sendTracked(_ request: FCMRequest, credential: FCMCredential, deadline: Date) async -> TrackedAttempt {
        let start = ContinuousClock.now
        func failure(_ reason: String, _ disposition: PushDisposition, message: String? = nil) -> TrackedAttempt {
            TrackedAttempt(
                attempt: FCMAttempt(
                    status: nil, reason: reason, message: message, disposition: disposition, messageName: nil, retryAfter: nil,
                    latency: ContinuousClock.now - start))
        }
        let token: FCMAccessToken
        do {
            token = try await tokens.token(for: credential)
        } catch {
            return failure(error.reason, error.disposition, message: error.detail)
        }
        let http = HTTP2Request(
            path: configuration.sendPath(projectID: credential.projectID),
            headers: [("content-type", "application/json; charset=UTF-8"), ("authorization", "Bearer " + token.value)],
            body: request.body)
        let sent = ContinuousClock.now
        do {
            let response = try await pool.send(
                http, timeout: TimeAmount(configuration.requestTimeout),
                deadline: .after(deadline.timeIntervalSince(clock.now)))
            let latency = ContinuousClock.now - sent
            metrics.push.recordLatency(latency, kind: request.kind)
            let status = response.status
            if (200..<300).contains(status) {
                let name = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["name"] as? String
                return TrackedAttempt(
                    attempt: FCMAttempt(
                        status: status, reason: nil, message: nil, disposition: .delivered, messageName: name, retryAfter: nil,
                        latency: latency),
                    sentToken: token.value)
            }
            let error = FCMErrorBody(json: Data(response.body))
            let attempt = FCMAttempt(
                status: status, reason: error?.reason(httpStatus: status) ?? "HTTP\(status)", message: error?.message,
                disposition: FCMDispositionRules.disposition(status: status, error: error), messageName: nil,
                retryAfter: Self.retryAfter(response.headers.first(name: "retry-after"), now: clock.now), latency: latency)
            return TrackedAttempt(attempt: attempt, sentToken: token.value, errorCode: error?.errorCode)
        } catch {
            switch error.kind {
            case .timedOut: return failure("Timeout", .retry)
            case .queueDeadline:
                // Every connection was full until the deadline (too few connections for the
                // volume), or the push came to the pool too late: the detail says which.
                failureLog.warning("FCM push not sent before its deadline: \(error.cause)", metadata: ["push.reason": .string(error.detail)], logger: logger)
                return failure("Timeout", .retry)
            case .shutDown: return failure("ClientShutDown", .drop, message: "the FCM client is shut down")
            case .connectFailed:
                failureLog.warning("cannot connect to FCM", metadata: ["push.reason": .string(error.detail)], logger: logger)
                return failure("ConnectionError", .retry)
            case .refused, .connectionLost:
                logger.debug("FCM connection error", metadata: ["push.reason": .string(error.description)])
                var lost = failure("ConnectionError", .retry)
                lost.connectionLost = true
                return lost
            }
        }
    }

    /// An attempt with the access token it carried (kept out of the public value: it is a credential).
    private struct TrackedAttempt {
        /// The connection was lost (or the stream refused too often) before an answer.
        var connectionLost = false
        var attempt: FCMAttempt
        var sentToken: String?
        var errorCode: FCMErrorCode?
    }

    /// `Retry-After` as seconds or an HTTP date, capped at an hour; `nil` when absent or unreadable.
    static func retryAfter(_ value: String?, now: Date) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value) { return .seconds(min(max(0, seconds), 3600)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return .milliseconds(Int64(min(max(0, date.timeIntervalSince(now)), 3600) * 1000))
    }
}

/// The AsyncHTTPClient an ``FCMClient`` exchanges OAuth assertions with, created at the first exchange and closed once.
final class FCMTransport: Sendable {
    private enum State {
        case idle
        case running(HTTPClient)
        case shutDown
    }

    private let state = Mutex(State.idle)
    private let extraTrustRoots: [NIOSSLCertificate]
    private let logger: Logger

    init(extraTrustRoots: [NIOSSLCertificate], logger: Logger) {
        self.extraTrustRoots = extraTrustRoots
        self.logger = logger
    }

    /// The client, created on first use; `nil` after ``shutdown()``.
    func client() -> HTTPClient? {
        state.withLock { state in
            switch state {
            case .running(let client):
                return client
            case .shutDown:
                return nil
            case .idle:
                let client = makeClient()
                state = .running(client)
                return client
            }
        }
    }

    func shutdown() async {
        let client = state.withLock { state -> HTTPClient? in
            defer { state = .shutDown }
            if case .running(let client) = state { return client }
            return nil
        }
        try? await client?.shutdown()
    }

    private func makeClient() -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if !extraTrustRoots.isEmpty { tls.additionalTrustRoots = [.certificates(extraTrustRoots)] }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.decompression = .disabled
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool = .init(idleTimeout: .seconds(300))
        configuration.timeout = .init(connect: .seconds(10))
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration, backgroundActivityLogger: logger)
    }
}
