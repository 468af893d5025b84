import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import Logging
import RingRelayCore
import RingRelayServer

/// `ringrelay serve`: runs the server until SIGTERM/SIGINT.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the RingRelay server.",
        discussion: """
            Every option can also be set as an environment variable (RINGRELAY_PORT, RINGRELAY_DATA_DIR, …) \
            or in a .env file in the working directory. Flags win over the environment, the environment over .env.
            """)

    @Option(help: "Address to listen on. [env: RINGRELAY_HOST] (default: 127.0.0.1)")
    var host: String?

    @Option(help: "Port to listen on; 0 picks a free one. [env: RINGRELAY_PORT] (default: 8080)")
    var port: String?

    @Option(help: "Directory for the SQLite database and generated secrets. [env: RINGRELAY_DATA_DIR] (default: ./ringrelay-data)")
    var dataDir: String?

    @Option(help: "Admin token; generated and stored in the data directory when unset. [env: RINGRELAY_ADMIN_TOKEN]")
    var adminToken: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical. [env: RINGRELAY_LOG_LEVEL] (default: info)")
    var logLevel: String?

    @Option(help: "text or json (one JSON object a line). [env: RINGRELAY_LOG_FORMAT] (default: text)")
    var logFormat: String?

    @Flag(inversion: .prefixedNo, help: "Log one line per request: method, route, status, duration, request id. [env: RINGRELAY_ACCESS_LOG] (default: false)")
    var accessLog: Bool?

    @Option(help: "APNs production base URL. [env: RINGRELAY_APNS_ENDPOINT_PRODUCTION] (default: https://api.push.apple.com)")
    var apnsEndpointProduction: String?

    @Option(help: "APNs development base URL. [env: RINGRELAY_APNS_ENDPOINT_SANDBOX] (default: https://api.sandbox.push.apple.com)")
    var apnsEndpointSandbox: String?

    @Option(help: "PEM file of extra certificates to trust for push services, e.g. a simulator's. [env: RINGRELAY_PUSH_CA_FILE]")
    var pushCaFile: String?

    @Option(help: "Seconds to wait for one APNs answer. [env: RINGRELAY_APNS_TIMEOUT] (default: 10)")
    var apnsTimeout: String?

    @Option(
        help:
            "FCM HTTP v1 base URL; OAuth goes to each service account's token_uri. [env: RINGRELAY_FCM_ENDPOINT] (default: https://fcm.googleapis.com)"
    )
    var fcmEndpoint: String?

    @Flag(
        inversion: .prefixedNo,
        help: "Trust X-Forwarded-Proto/-Host for the URL clients used, and X-Request-Id as the request id (behind a proxy that sets them). [env: RINGRELAY_TRUST_PROXY] (default: false)"
    )
    var trustProxy: Bool?

    @Option(help: "How long a provider call rings, e.g. 45s. [env: RINGRELAY_RING_TIMEOUT] (default: 45s)")
    var ringTimeout: String?

    @Option(help: "Longest a webhook waits for first push answers, e.g. 5s. [env: RINGRELAY_WEBHOOK_WAIT] (default: 5s)")
    var webhookWait: String?

    @Option(help: "How long a live ring waits for the device's ack before its pushes go too, e.g. 1s or 0.5s. [env: RINGRELAY_LIVE_FALLBACK] (default: 1s)")
    var liveFallback: String?

    @Option(help: "Most active bindings one identity may have; more is refused 409 too_many_bindings. [env: RINGRELAY_MAX_BINDINGS_PER_IDENTITY] (default: 100)")
    var maxBindingsPerIdentity: String?

    @Option(help: "Most bindings one account may have. [env: RINGRELAY_MAX_BINDINGS_PER_ACCOUNT] (default: 1000000)")
    var maxBindingsPerAccount: String?

    @Option(help: "How late the database or the instances' bus may answer before new calls are refused with 503 and Retry-After, e.g. 0.25s. [env: RINGRELAY_OVERLOAD_DELAY] (default: 0.25s)")
    var overloadDelay: String?

    @Option(help: "How often live connections are pinged; a silent one is dropped at the next ping, e.g. 15s. [env: RINGRELAY_LIVE_PING_INTERVAL] (default: 15s)")
    var livePingInterval: String?

    @Option(help: "Longest a shutdown (SIGTERM, SIGINT) waits for requests and connections; then they are closed, e.g. 10s. [env: RINGRELAY_SHUTDOWN_GRACE] (default: 10s)")
    var shutdownGrace: String?

    @Option(help: "Longest an HTTP connection may send nothing (between requests, or in a stalled body) before it is closed. [env: RINGRELAY_IDLE_TIMEOUT] (default: 60s)")
    var idleTimeout: String?

    @Option(help: "Longest a new connection may take to send its first request line and headers. [env: RINGRELAY_HEADER_TIMEOUT] (default: 30s)")
    var headerTimeout: String?

    @Option(help: "Longest a request's body may take to arrive whole, from its head. [env: RINGRELAY_BODY_TIMEOUT] (default: 30s)")
    var bodyTimeout: String?

    @Option(help: "Most connections open at once, HTTP and live together. [env: RINGRELAY_MAX_CONNECTIONS] (default: 20000)")
    var maxConnections: String?

    @Option(help: "Most connections open at once from one address; not applied with --trust-proxy. [env: RINGRELAY_MAX_CONNECTIONS_PER_ADDRESS] (default: 5000)")
    var maxConnectionsPerAddress: String?

    @Option(help: "How long call records are kept, e.g. 7d. [env: RINGRELAY_CALL_RETENTION] (default: 7d)")
    var callRetention: String?

    @Option(help: "Per second, each a budget of its own: webhooks per account, API-key calls per account, device calls per calling identity (a tenth); 0 = unlimited. [env: RINGRELAY_RATE_LIMIT] (default: 100)")
    var rateLimit: String?

    @Option(help: "Burst above the rate limit. [env: RINGRELAY_RATE_LIMIT_BURST] (default: 200)")
    var rateLimitBurst: String?

    @Option(help: "How hard each SQLite commit waits for the disk: normal survives a killed process, full a power loss too (one disk flush per commit). [env: RINGRELAY_SQLITE_SYNC] (default: normal)")
    var sqliteSync: String?

    @Option(
        help:
            "PostgreSQL database to use instead of the SQLite file, e.g. postgres://user:password@host:5432/ringrelay; several instances may share it. A secret: prefer the environment. [env: RINGRELAY_DATABASE_URL]"
    )
    var databaseUrl: String?

    @Option(help: "Bearer token /metrics requires (at least 16 characters); unset, /metrics is open. Prefer the environment. [env: RINGRELAY_METRICS_TOKEN]")
    var metricsToken: String?

    func run() async throws {
        // Swift concurrency's jobs run on NIO's event loops rather than a pool of their own: a
        // request no longer hops between the two thread pools (each hop a wake-up and a context
        // switch) on its way from socket to handler to store to push and back. It cut the
        // server's CPU per webhook by a fifth and per live call by a twelfth. The jobs run on the
        // generic executor, not isolated to their loop as NIO's own hook runs them: that took ~150
        // round trips through a loop's queue off each webhook, 7 % of its CPU at 1,000/s (docs/BENCHMARKS.md).
        // First thing the server does, before it starts any task of its own.
        EventLoopGlobalExecutor.install()
        var flags: [ServerConfiguration.Key: String] = [:]
        flags[.host] = host
        flags[.port] = port
        flags[.dataDir] = dataDir
        flags[.adminToken] = adminToken
        flags[.logLevel] = logLevel
        flags[.logFormat] = logFormat
        flags[.accessLog] = accessLog.map { $0 ? "true" : "false" }
        flags[.apnsEndpointProduction] = apnsEndpointProduction
        flags[.apnsEndpointSandbox] = apnsEndpointSandbox
        flags[.pushCAFile] = pushCaFile
        flags[.apnsTimeout] = apnsTimeout
        flags[.trustProxy] = trustProxy.map { $0 ? "true" : "false" }
        flags[.ringTimeout] = ringTimeout
        flags[.webhookWait] = webhookWait
        flags[.liveFallback] = liveFallback
        flags[.overloadDelay] = overloadDelay
        flags[.maxBindingsPerIdentity] = maxBindingsPerIdentity
        flags[.maxBindingsPerAccount] = maxBindingsPerAccount
        flags[.livePingInterval] = livePingInterval
        flags[.shutdownGrace] = shutdownGrace
        flags[.idleTimeout] = idleTimeout
        flags[.headerTimeout] = headerTimeout
        flags[.bodyTimeout] = bodyTimeout
        flags[.maxConnections] = maxConnections
        flags[.maxConnectionsPerAddress] = maxConnectionsPerAddress
        flags[.callRetention] = callRetention
        flags[.rateLimit] = rateLimit
        flags[.rateLimitBurst] = rateLimitBurst
        flags[.fcmEndpoint] = fcmEndpoint
        flags[.sqliteSync] = sqliteSync
        flags[.databaseURL] = databaseUrl
        flags[.metricsToken] = metricsToken
        let configuration: ServerConfiguration
        do {
            configuration = try ServerConfiguration(reader: try await ServerConfiguration.reader(flags: flags))
        } catch {
            await StartupFailure.report("\(error)", format: ServerConfiguration.logFormat(flags: flags))
            throw ExitCode(78)  // EX_CONFIG
        }
        LoggingSystem.bootstrap { label in
            var handler = LineLogHandler.standardError(label: label, format: configuration.logFormat)
            handler.logLevel = configuration.logLevel
            return handler
        }
        var logger = Logger(label: "ringrelay")
        logger.logLevel = configuration.logLevel
        do {
            try await runServer(
                configuration: configuration, logger: logger,
                announce: { created in
                    if let token = created.adminToken {
                        say("Generated an admin token (stored in \(configuration.dataDirectory)/\(Bootstrap.adminTokenFile), shown once):")
                        say("  RINGRELAY_ADMIN_TOKEN=\(token)")
                    }
                    if let account = created.defaultAccount {
                        say("Created the account 'default' (\(account.id)). Its API key, shown once:")
                        say("  RINGRELAY_TOKEN=\(account.apiKey)")
                    }
                },
                onListening: { port in
                    say("RingRelay listening on http://\(configuration.host):\(port)")
                })
        } catch let error as RingRelayError where error.code == RingRelayError.Code.listenFailed.rawValue {
            // The message names the cause and the flag to change; the errno behind it adds nothing.
            StartupFailure.report(error.message, code: error.code, format: configuration.logFormat)
            throw ExitCode.failure
        } catch {
            StartupFailure.report("ringrelay serve failed: \(error)", format: configuration.logFormat)
            throw ExitCode.failure
        }
    }
}

/// Says why `serve` stopped before it served, on standard error: a plain line, or with
/// `--log-format json` a JSON log line like every other, since a log collector reads no plain
/// text (a configuration error included, as long as the log format itself could be read).
enum StartupFailure {
    static func report(_ message: String, code: String? = nil, format: LogFormat) {
        switch format {
        case .text:
            printError(message)
        case .json:
            let logger = Logger(label: "ringrelay") { LineLogHandler.standardError(label: $0, format: .json) }
            logger.critical("\(message)", metadata: code.map { ["error.code": .string($0)] })
        }
    }
}

/// Writes a line to standard error. Nobody reading it is no reason to crash: the line is dropped.
func printError(_ message: String) {
    try? FileHandle.standardError.write(contentsOf: Data((message + "\n").utf8))
}

/// Writes a line to standard output at once (not buffered), so scripts and tests reading the
/// output see secrets and the listening address as soon as they exist.
///
/// - Returns: whether it was written; `false` when the reader is gone (a closed pipe), where
///   `FileHandle.write(_:)` would have stopped the process with a fatal error.
@discardableResult
func say(_ message: String) -> Bool {
    (try? FileHandle.standardOutput.write(contentsOf: Data((message + "\n").utf8))) != nil
}
