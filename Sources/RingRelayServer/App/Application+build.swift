import Configuration
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM
import RingRelayStore
import RingRelayWire
import NIOCore
import ServiceLifecycle
import UnixSignals

/// Builds the RingRelay HTTP application: the one place that picks concrete types.
///
/// - Parameters:
///   - configuration: validated settings (host, port, limits).
///   - store: the data store; the caller owns its lifetime.
///   - adminToken: the admin bearer token.
///   - clock: time source for token expiry.
///   - logger: the server's logger.
///   - services: long-lived services that start before the HTTP server and stop after it has drained.
///   - shutdownNotice: told first when the process shuts down; live connections then get 1001.
///   - onServerRunning: called once the server accepts connections (tests read the bound port here).
/// - Returns: an application to run, or to test with `app.test(.router)`.
///
/// ```swift
/// let app = try await buildApplication(configuration: config, store: store, adminToken: token)
/// try await app.runService()
/// ```
public func buildApplication(
    configuration: ServerConfiguration,
    store: any DataStore,
    adminToken: String,
    clock: any WallClock = SystemWallClock(),
    logger: Logger = Logger(label: "ringrelay"),
    bus: any Cluster = SingleInstanceBus(),
    services: [any Service] = [],
    shutdownNotice: ShutdownNotice? = nil,
    onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    // Every line a request causes carries its id, the services' own loggers' lines included.
    var logger = logger
    logger.handler.metadataProvider = .multiplex([logger.metadataProvider, RequestIDs.metadataProvider].compactMap { $0 })
    let appServices = try await AppServices.make(
        configuration: configuration, store: store, bus: bus, adminToken: adminToken, clock: clock, logger: logger)
    let router = buildRouter(services: appServices)
    let hub = appServices.hub
    shutdownNotice?.onShutdown { hub.closeAll(code: .goingAway) }
    var appLogger = logger
    appLogger.logLevel = configuration.logLevel
    let refusals = ParserRefusals(logger: appLogger)
    return Application(
        router: router,
        // The same router answers the WebSocket upgrade, so /v1/connect gets the same authentication
        // and error bodies as every other route. Pings are LiveKeepAliveHandler's, not the library's.
        server: .guardedHTTP1WebSocketUpgrade(
            router: router,
            configuration: .init(
                http1: .init(
                    additionalChannelHandlers: [RequestReadGuard(bodyTimeout: TimeAmount(configuration.bodyTimeout), refusals: refusals)],
                    idleTimeout: TimeAmount(configuration.idleTimeout)),
                ws: .init(maxFrameSize: ConnectController.maxFrameBytes, autoPing: .disabled)),
            connections: ConnectionLimiter(
                maximum: configuration.maxConnections,
                maximumPerAddress: configuration.trustProxy ? nil : configuration.maxConnectionsPerAddress),
            headerTimeout: configuration.headerTimeout, refusals: refusals),
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "RingRelay"),
        // Listed after the caller's services, so they shut down before them and after the HTTP
        // server has drained.
        services: services + appServices.lifecycleServices,
        onServerRunning: onServerRunning,
        logger: appLogger)
}

extension AppServices {
    /// Creates the collaborators: the signing key from the store, metrics, the push clients, the
    /// ring path.
    static func make(
        configuration: ServerConfiguration, store: any DataStore, bus: any Cluster = SingleInstanceBus(), adminToken: String,
        clock: any WallClock, logger: Logger
    ) async throws -> AppServices {
        let signingKey = try await store.setting(named: "access_token.signing_key") {
            Data(Secrets.generate(prefix: "").utf8)
        }
        let metrics = ServerMetrics()
        let faults = ConfigurationFaults()
        let credentials = CredentialCache(store: store)
        let apns = try APNsClient(configuration: configuration.apns, clock: clock, logger: logger, metricsFactory: metrics.factory)
        let fcm = try FCMClient(configuration: configuration.fcm, clock: clock, logger: logger, metricsFactory: metrics.factory)
        let pusher = BindingPusher(
            store: store, credentials: credentials, apns: APNsPushProvider(client: apns), fcm: FCMPushProvider(client: fcm, clock: clock, tokenHosts: CredentialValidator.fcmTokenHosts(for: configuration.fcm)),
            faults: faults, clock: clock, logger: logger)
        let hub = LiveHub(clock: clock)
        let limits = AccountLimitsCache(store: store)
        let cluster = ClusterSync(bus: bus, store: store, credentials: credentials, limits: limits, faults: faults, hub: hub, logger: logger)
        let executor = RingExecutor(
            store: store, hub: hub, cluster: cluster, pusher: pusher, clock: clock, metrics: metrics, liveFallback: configuration.liveFallback)
        let admission = Admission(loops: EventLoopLag(), store: store, bus: bus, limit: configuration.overloadDelay, metrics: metrics, logger: logger)
        let ringer = Ringer(
            store: store, hub: hub, cluster: cluster, executor: executor, clock: clock, metrics: metrics, logger: logger,
            ringTimeout: configuration.ringTimeout, answerWait: configuration.webhookWait)
        return AppServices(
            store: store, signer: AccessTokenSigner(key: signingKey), adminToken: adminToken, clock: clock, configuration: configuration,
            metrics: metrics, credentials: credentials, faults: faults, pusher: pusher, executor: executor, cluster: cluster,
            limiter: RateLimiter(rate: configuration.rateLimit, burst: configuration.rateLimitBurst, clock: clock), hub: hub,
            ringer: ringer, admission: admission,
            calls: CallService(
                store: store, ringer: ringer, cluster: cluster,
                notifier: MissedCallNotifier(store: store, executor: executor, clock: clock, logger: logger), clock: clock,
                metrics: metrics, logger: logger),
            logger: logger)
    }
}

/// Builds the router with every middleware and route; each controller gets only what it uses.
func buildRouter(services: AppServices) -> Router<RingRelayRequestContext> {
    let router = Router(context: RingRelayRequestContext.self)
    let configuration = services.configuration
    let maxBodyBytes = configuration.maxBodyBytes
    // Order matters: every answer gets its request id, the access log and metrics see the final
    // status, errors are rendered before they read it, and authentication runs inside the error
    // mapping so its 401s get the house body (and come before a query's 422).
    router.add(middleware: RequestIDMiddleware(trustProxy: configuration.trustProxy))
    if configuration.accessLog { router.add(middleware: AccessLogMiddleware(logger: services.logger)) }
    router.add(middleware: MetricsMiddleware(metrics: services.metrics))
    router.add(middleware: ErrorMiddleware())
    router.add(middleware: AdmissionMiddleware(admission: services.admission))
    router.add(middleware: BodyBudgetMiddleware(budget: BodyBudget(bytes: configuration.bodyBytesInFlight)))
    router.add(
        middleware: AuthMiddleware(
            adminToken: services.adminToken, metricsToken: configuration.metricsToken, store: services.store, signer: services.signer, clock: services.clock))
    router.add(middleware: QueryParameterMiddleware())
    router.add(middleware: BodilessRequestMiddleware())
    OpsController(store: services.store, faults: services.faults, metrics: services.metrics, metricsToken: configuration.metricsToken)
        .register(on: router)
    AccountsController(store: services.store, clock: services.clock, cluster: services.cluster, maxBodyBytes: maxBodyBytes).register(on: router)
    CredentialsController(
        store: services.store, clock: services.clock, cluster: services.cluster, maxBodyBytes: maxBodyBytes,
        fcmTokenHosts: CredentialValidator.fcmTokenHosts(for: configuration.fcm)
    ).register(on: router)
    AccessTokensController(
        signer: services.signer, clock: services.clock, maxTTL: configuration.maxAccessTokenTTL, maxBodyBytes: maxBodyBytes
    ).register(on: router)
    CallSettingsController(store: services.store, maxBodyBytes: maxBodyBytes).register(on: router)
    IdentityKeysController(store: services.store).register(on: router)
    BindingsController(
        store: services.store, cluster: services.cluster, clock: services.clock, maxBodyBytes: maxBodyBytes,
        limits: BindingLimits(perIdentity: configuration.maxBindingsPerIdentity, perAccount: configuration.maxBindingsPerAccount),
        accountLimits: services.cluster.limits,
        // One full batch fits in the account's burst.
        accountLimiter: RateLimiter(
            rate: configuration.rateLimit, burst: max(configuration.rateLimitBurst, Double(BindingsController.maxBatchItems)), clock: services.clock),
        identityLimiter: RateLimiter(rate: configuration.rateLimit / 10, burst: max(1, configuration.rateLimitBurst / 10), clock: services.clock)
    ).register(on: router)
    TestPushController(
        store: services.store, clock: services.clock, pusher: services.pusher,
        limiter: RateLimiter(rate: TestPushController.perSecond, burst: TestPushController.burst, clock: services.clock)
    ).register(on: router)
    WebhooksController(
        credentials: services.credentials, ringer: services.ringer, limiter: services.limiter, limits: services.cluster.limits, metrics: services.metrics,
        maxBodyBytes: maxBodyBytes, trustProxy: configuration.trustProxy, rejections: RateLimitedLog(notLoggedKey: "rejections.not_logged")
    ).register(on: router)
    // Calls have budgets of their own, apart from the provider webhooks' (services.limiter): one
    // per account for its backend (API key), and a tenth of it per calling identity (device
    // tokens), so one device cannot spend its account's budget, nor anyone the webhooks'.
    CallsController(
        store: services.store, calls: services.calls, limits: services.cluster.limits,
        accountLimiter: RateLimiter(rate: configuration.rateLimit, burst: configuration.rateLimitBurst, clock: services.clock),
        identityLimiter: RateLimiter(rate: configuration.rateLimit / 10, burst: max(1, configuration.rateLimitBurst / 10), clock: services.clock),
        maxBodyBytes: maxBodyBytes
    ).register(on: router)
    ConnectController(
        hub: services.hub, cluster: services.cluster, calls: services.calls, metrics: services.metrics, clock: services.clock, pingInterval: configuration.livePingInterval,
        outboundBudget: configuration.liveOutboundBudget)
        .register(on: router)
    return router
}

/// Runs `ringrelay serve` until SIGTERM or SIGINT, then drains requests and closes the store.
///
/// - Parameters:
///   - configuration: validated settings.
///   - logger: the process logger.
///   - announce: called once the server listens, with what first start created (secrets to print
///     once). A start that fails before, on a port in use say, creates nothing.
///   - onListening: called with the bound port once the server accepts connections, after `announce`.
/// - Throws: ``RingRelayError`` `listen_failed` naming the flag to change when the address cannot
///   be bound; what start-up or the services threw.
public func runServer(
    configuration: ServerConfiguration,
    logger: Logger,
    announce: @escaping @Sendable (Bootstrap.Created) -> Void = { _ in },
    onListening: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws {
    let bootstrap = try await Bootstrap.prepare(configuration: configuration, logger: logger)
    let notice = ShutdownNotice()
    let (listening, listener) = AsyncStream.makeStream(of: Int.self)
    let app = try await buildApplication(
        configuration: configuration, store: bootstrap.store, adminToken: bootstrap.adminToken, logger: logger, bus: bootstrap.bus,
        shutdownNotice: notice,
        onServerRunning: { channel in
            listener.yield(channel.localAddress?.port ?? configuration.port)
            listener.finish()
        })
    let announcer = StartupAnnouncer(bootstrap: bootstrap, listening: listening, announce: announce, onListening: onListening)
    // A bounded drain: after --shutdown-grace the group cancels what is still running (a WebSocket
    // client that ignores the close frame, a request that never ends), which closes its channels.
    var group = ServiceGroupConfiguration(
        services: [.init(service: app), .init(service: notice), .init(service: announcer, successTerminationBehavior: .ignore)],
        gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    group.maximumGracefulShutdownDuration = configuration.shutdownGrace
    group.maximumCancellationDuration = .seconds(5)
    let ended: Result<Void, any Error>
    do {
        try await ServiceGroup(configuration: group).run()
        ended = .success(())
    } catch {
        ended = .failure(error)
    }
    // The store closes once every service has stopped, not as a service of the group: a group
    // stops its services one by one, last first, only on a graceful shutdown. Cancelled (the grace
    // ran out, or a service failed), it stops them all at once, and the store closed under those
    // still finishing, such as ClusterSync leaving the instances' directory.
    try await bootstrap.store.close()
    logger.info("store closed")
    do {
        try ended.get()
    } catch where notice.hasBegun {
        // The grace ran out and what was left was cancelled: that is the bounded drain working.
        logger.warning(
            "shutdown grace passed; closed what was still open",
            metadata: ["shutdown.grace": .string("\(configuration.shutdownGrace)"), "error.cause": .string("\(error)")])
    } catch let error as IOError {
        throw ListenFailure.error(error, host: configuration.host, port: configuration.port) ?? error
    }
}

/// Why the server could not bind its address, said with the flag that changes it.
enum ListenFailure {
    /// The start-up error for a failed bind, or `nil` when `error` is not one.
    static func error(_ error: IOError, host: String, port: Int) -> RingRelayError? {
        let advice: String
        switch error.errnoCode {
        case EADDRINUSE:
            advice = "the port is already in use; stop what uses it, or pass --port (RINGRELAY_PORT) with a free port, or 0 to pick one."
        case EACCES:
            advice = "ports below 1024 need privileges; pass --port (RINGRELAY_PORT) with a port from 1024 up."
        case EADDRNOTAVAIL:
            advice = "this machine has no such address; pass --host (RINGRELAY_HOST) with one of its addresses, or 0.0.0.0 for all."
        default:
            return nil
        }
        return RingRelayError(.unavailable, code: .listenFailed, "Cannot listen on \(host):\(port) because \(advice)", underlying: error)
    }
}
