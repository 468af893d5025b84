import Configuration
import Foundation
import Logging
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM
import RingRelayPostgres
import RingRelayStore

/// Everything `ringrelay serve` can be configured with, validated.
///
/// Values come from one `ConfigReader` whose providers are, in order: command-line flags,
/// environment variables, a `.env` file, then the defaults below. Keys are `ringrelay.<name>`,
/// which the environment provider spells `RINGRELAY_<NAME>` (`ringrelay.data-dir` →
/// `RINGRELAY_DATA_DIR`). Every value is read as text and parsed here, so a bad value stops
/// start-up with a message naming both the flag and the variable.
public struct ServerConfiguration: Sendable, DescribedByNameOnly {
    /// Address to listen on.
    public var host: String = "127.0.0.1"
    /// Port to listen on; 0 picks a free port.
    public var port: Int = 8080
    /// Where the SQLite database and the generated admin token live.
    public var dataDirectory: String = "./ringrelay-data"
    /// The PostgreSQL database to use instead of the SQLite file in ``dataDirectory``: several
    /// instances may share it. A secret (it holds a password).
    public var databaseURL: PostgresDatabaseURL?
    /// Admin token; when `nil` one is generated on first start and kept in the data directory.
    public var adminToken: String?
    /// Log level.
    public var logLevel: Logger.Level = .info
    /// How log lines are written.
    public var logFormat: LogFormat = .text
    /// Whether every request gets a log line (method, route, status, duration, request id).
    public var accessLog = false
    /// Largest request body accepted, in bytes.
    public var maxBodyBytes: Int = 64 * 1024
    /// Longest lifetime a device access token may ask for.
    public var maxAccessTokenTTL: Int = 86_400
    /// How APNs is reached (endpoints, extra trust roots, timeouts).
    public var apns = APNsConfiguration()
    /// How FCM is reached (endpoint, extra trust roots, timeouts). OAuth goes to each service
    /// account's own `token_uri`.
    public var fcm = FCMConfiguration()
    /// Whether `X-Forwarded-Proto` and `X-Forwarded-Host` describe the URL clients used, and a
    /// well-formed `X-Request-Id` is kept as the request's id (only behind a proxy that sets them).
    public var trustProxy = false
    /// How long call records are kept.
    public var callRetention: Duration = .seconds(7 * 24 * 3600)
    /// How long a provider call rings.
    public var ringTimeout: Duration = .seconds(45)
    /// How long a webhook waits for the devices' first answers before it responds.
    public var webhookWait: Duration = .seconds(5)
    /// How long a live ring waits for the device's ack before its push bindings are rung too.
    public var liveFallback: Duration = .seconds(1)
    /// How long the database's or the instances' bus's line may get before new calls are refused
    /// (`503 overloaded`, see `Admission`).
    public var overloadDelay: Duration = .milliseconds(250)
    /// How long a live connection may be quiet before the server pings it; one still quiet a second
    /// interval later is dropped.
    public var livePingInterval: Duration = .seconds(15)
    /// Longest a graceful shutdown waits for requests and connections to finish; after it, the
    /// rest are closed and the process exits.
    public var shutdownGrace: Duration = .seconds(10)
    /// Longest an HTTP connection may sit without a byte of a request (between requests, or in a
    /// stalled body) before it is closed.
    public var idleTimeout: Duration = .seconds(60)
    /// Longest a new connection may take to send its first request line and headers.
    public var headerTimeout: Duration = .seconds(30)
    /// Longest a request's body may take to arrive whole, from its head.
    public var bodyTimeout: Duration = .seconds(30)
    /// Most connections open at once (HTTP and live together).
    public var maxConnections = 20_000
    /// Most connections open at once from one source address (not applied with `--trust-proxy`).
    public var maxConnectionsPerAddress = 5_000
    /// What a live connection may have waiting to be written before it is closed (1008): a device
    /// that stops reading costs at most this.
    public var liveOutboundBudget = LiveOutboundLimits(bytes: 1 << 20, frames: 1024)
    /// How hard each SQLite commit waits for the disk: `normal` survives a killed process,
    /// `full` a power loss too.
    public var sqliteSync: SQLiteStore.Sync = .normal
    /// When set, `/metrics` answers only requests with `Authorization: Bearer <this>` (or the
    /// admin token).
    public var metricsToken: String?
    /// Webhooks and calls per second per account (0: unlimited).
    /// Bytes of request bodies all requests together may hold while they are read (``BodyBudget``):
    /// room for 64 of the largest batches.
    public var bodyBytesInFlight = 64 * 1024 * 1024
    /// Most active bindings an identity may have.
    public var maxBindingsPerIdentity = 100
    /// Most bindings (any status) an account may have.
    public var maxBindingsPerAccount = 1_000_000
    public var rateLimit: Double = 100
    /// Burst allowed above the rate.
    public var rateLimitBurst: Double = 200

    /// The defaults.
    public init() {}

    /// The keys, as documented in the README's configuration table.
    public enum Key: String, CaseIterable, Sendable {
        case host, port
        case dataDir = "data-dir"
        case adminToken = "admin-token"
        case logLevel = "log-level"
        case logFormat = "log-format"
        case accessLog = "access-log"
        case apnsEndpointProduction = "apns-endpoint-production"
        case apnsEndpointSandbox = "apns-endpoint-sandbox"
        case pushCAFile = "push-ca-file"
        case apnsTimeout = "apns-timeout"
        case fcmEndpoint = "fcm-endpoint"
        case trustProxy = "trust-proxy"
        case callRetention = "call-retention"
        case ringTimeout = "ring-timeout"
        case webhookWait = "webhook-wait"
        case liveFallback = "live-fallback"
        case overloadDelay = "overload-delay"
        case livePingInterval = "live-ping-interval"
        case shutdownGrace = "shutdown-grace"
        case idleTimeout = "idle-timeout"
        case headerTimeout = "header-timeout"
        case bodyTimeout = "body-timeout"
        case maxConnections = "max-connections"
        case maxConnectionsPerAddress = "max-connections-per-address"
        case maxBindingsPerIdentity = "max-bindings-per-identity"
        case maxBindingsPerAccount = "max-bindings-per-account"
        case rateLimit = "rate-limit"
        case rateLimitBurst = "rate-limit-burst"
        case sqliteSync = "sqlite-sync"
        case databaseURL = "database-url"
        case metricsToken = "metrics-token"

        /// The swift-configuration key, e.g. `ringrelay.data-dir`.
        public var configKey: String { "ringrelay.\(rawValue)" }
        /// The command-line flag, e.g. `--data-dir`.
        public var flag: String { "--\(rawValue)" }
        /// The environment variable, e.g. `RINGRELAY_DATA_DIR`.
        public var environmentVariable: String {
            "RINGRELAY_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
        }
        /// Whether the value is a secret (redacted by the reader).
        public var isSecret: Bool { self == .adminToken || self == .metricsToken || self == .databaseURL }
    }

    /// Reads and validates the configuration.
    ///
    /// - Throws: ``ConfigurationError`` naming the first bad key.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        func value(_ key: Key) -> String? {
            let text = reader.string(forKey: ConfigKey(key.configKey), isSecret: key.isSecret)
            return text?.isEmpty == true ? nil : text
        }
        if let host = value(.host) { self.host = host }
        if let text = value(.port) {
            guard let port = Int(text), (0...65_535).contains(port) else {
                throw ConfigurationError(key: .port, "must be a whole number from 0 to 65535, got '\(text)'.")
            }
            self.port = port
        }
        if let directory = value(.dataDir) { self.dataDirectory = directory }
        if let token = value(.adminToken) {
            guard token.count >= 16 else {
                throw ConfigurationError(key: .adminToken, "must be at least 16 characters long.")
            }
            self.adminToken = token
        }
        if let text = value(.logLevel) {
            guard let level = Logger.Level(rawValue: text.lowercased()) else {
                let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")
                throw ConfigurationError(key: .logLevel, "must be one of \(levels), got '\(text)'.")
            }
            self.logLevel = level
        }
        if let text = value(.logFormat) {
            guard let format = LogFormat(rawValue: text.lowercased()) else {
                throw ConfigurationError(key: .logFormat, "must be text or json, got '\(text)'.")
            }
            logFormat = format
        }
        if let text = value(.accessLog) { accessLog = try Self.boolean(text, key: .accessLog) }
        if let text = value(.apnsEndpointProduction) { apns.productionEndpoint = try Self.url(text, key: .apnsEndpointProduction) }
        if let text = value(.apnsEndpointSandbox) { apns.sandboxEndpoint = try Self.url(text, key: .apnsEndpointSandbox) }
        if let path = value(.pushCAFile) {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw ConfigurationError(key: .pushCAFile, "cannot read '\(path)'; pass a PEM file of certificates to trust.")
            }
            apns.extraTrustRootsFile = path
            fcm.extraTrustRootsFile = path
        }
        if let text = value(.apnsTimeout) {
            guard let seconds = Double(text), seconds > 0, seconds <= 60 else {
                throw ConfigurationError(key: .apnsTimeout, "must be a number of seconds from 0 to 60, got '\(text)'.")
            }
            apns.requestTimeout = .milliseconds(Int64(seconds * 1000))
        }
        if let text = value(.fcmEndpoint) { fcm.endpoint = try Self.url(text, key: .fcmEndpoint) }
        if let text = value(.trustProxy) { trustProxy = try Self.boolean(text, key: .trustProxy) }
        if let text = value(.callRetention) { callRetention = try Self.duration(text, key: .callRetention, within: 60...(365 * 86_400)) }
        if let text = value(.ringTimeout) { ringTimeout = try Self.duration(text, key: .ringTimeout, within: 5...180) }
        if let text = value(.webhookWait) { webhookWait = try Self.duration(text, key: .webhookWait, within: 0...30) }
        if let text = value(.liveFallback) { liveFallback = try Self.duration(text, key: .liveFallback, within: 0.05...30) }
        if let text = value(.overloadDelay) { overloadDelay = try Self.duration(text, key: .overloadDelay, within: 0.01...60) }
        if let text = value(.livePingInterval) { livePingInterval = try Self.duration(text, key: .livePingInterval, within: 1...300) }
        if let text = value(.shutdownGrace) { shutdownGrace = try Self.duration(text, key: .shutdownGrace, within: 0...300) }
        if let text = value(.idleTimeout) { idleTimeout = try Self.duration(text, key: .idleTimeout, within: 1...3600) }
        if let text = value(.headerTimeout) { headerTimeout = try Self.duration(text, key: .headerTimeout, within: 1...300) }
        if let text = value(.bodyTimeout) { bodyTimeout = try Self.duration(text, key: .bodyTimeout, within: 1...300) }
        if let text = value(.maxConnections) { maxConnections = try Self.integer(text, key: .maxConnections, within: 1...1_000_000) }
        if let text = value(.maxConnectionsPerAddress) {
            maxConnectionsPerAddress = try Self.integer(text, key: .maxConnectionsPerAddress, within: 1...1_000_000)
        }
        if let text = value(.sqliteSync) {
            guard let sync = SQLiteStore.Sync(rawValue: text.lowercased()) else {
                throw ConfigurationError(key: .sqliteSync, "must be normal or full, got '\(text)'.")
            }
            sqliteSync = sync
        }
        if let text = value(.databaseURL) {
            do {
                databaseURL = try PostgresDatabaseURL(text)
            } catch {
                // The reason only: the URL may hold a password.
                throw ConfigurationError(key: .databaseURL, "\(error.description)")
            }
        }
        if let token = value(.metricsToken) {
            guard token.count >= 16 else { throw ConfigurationError(key: .metricsToken, "must be at least 16 characters long.") }
            metricsToken = token
        }
        if let text = value(.maxBindingsPerIdentity) {
            guard let count = Int(text), (1...100_000).contains(count) else {
                throw ConfigurationError(key: .maxBindingsPerIdentity, "must be a whole number from 1 to 100000, got '\(text)'.")
            }
            maxBindingsPerIdentity = count
        }
        if let text = value(.maxBindingsPerAccount) {
            guard let count = Int(text), (1...1_000_000_000).contains(count) else {
                throw ConfigurationError(key: .maxBindingsPerAccount, "must be a whole number from 1 to 1000000000, got '\(text)'.")
            }
            maxBindingsPerAccount = count
        }
        if let text = value(.rateLimit) {
            guard let rate = Double(text), rate >= 0 else { throw ConfigurationError(key: .rateLimit, "must be a number ≥ 0, got '\(text)'.") }
            rateLimit = rate
        }
        if let text = value(.rateLimitBurst) {
            guard let burst = Double(text), burst >= 1 else {
                throw ConfigurationError(key: .rateLimitBurst, "must be a number ≥ 1, got '\(text)'.")
            }
            rateLimitBurst = burst
        }
    }

    /// Parses `true`/`1`/`yes` or `false`/`0`/`no`.
    static func boolean(_ text: String, key: Key) throws(ConfigurationError) -> Bool {
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw ConfigurationError(key: key, "must be true or false, got '\(text)'.")
        }
    }

    /// Parses a whole number within `range`.
    static func integer(_ text: String, key: Key, within range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw ConfigurationError(key: key, "must be a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'.")
        }
        return value
    }

    /// Parses `90`, `90s`, `15m`, `12h` or `7d` into a duration within `range` seconds.
    static func duration(_ text: String, key: Key, within range: ClosedRange<Double>) throws(ConfigurationError) -> Duration {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var number = text
        var unit = 1.0
        if let last = text.last, let factor = units[last] {
            number = String(text.dropLast())
            unit = factor
        }
        guard let value = Double(number), range.contains(value * unit) else {
            throw ConfigurationError(
                key: key, "must be a duration such as 45s, 15m, 12h or 7d between \(Int(range.lowerBound)) s and \(Int(range.upperBound)) s, got '\(text)'.")
        }
        return .milliseconds(Int64(value * unit * 1000))
    }

    private static func url(_ text: String, key: Key) throws(ConfigurationError) -> String {
        guard let url = URL(string: text), url.scheme == "https", url.host != nil, url.path.isEmpty || url.path == "/" else {
            let example = key == .fcmEndpoint ? "https://fcm.googleapis.com" : "https://api.push.apple.com"
            throw ConfigurationError(key: key, "must be an https URL without a path, such as \(example), got '\(text)'.")
        }
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    /// The log format the settings ask for, read on its own: a configuration that does not load
    /// (a bad port, an unreadable `.env`) is reported in it. Text when it cannot be read either.
    public static func logFormat(
        flags: [Key: String], environment: [String: String] = ProcessInfo.processInfo.environment, dotEnvPath: String = ".env"
    ) async -> LogFormat {
        let text: String?
        if let settings = try? await reader(flags: flags, environment: environment, dotEnvPath: dotEnvPath) {
            text = settings.string(forKey: ConfigKey(Key.logFormat.configKey))
        } else {
            // An unreadable .env: the flag and the environment still say what they say.
            text = flags[.logFormat] ?? environment[Key.logFormat.environmentVariable]
        }
        return text.flatMap { LogFormat(rawValue: $0.lowercased()) } ?? .text
    }

    /// A reader over flags, then the environment, then `.env` in the working directory.
    ///
    /// - Parameter flags: values given on the command line, by key.
    /// - Throws: ``DotEnvError`` when `.env` exists but cannot be read (see ``DotEnvFile``).
    public static func reader(
        flags: [Key: String], environment: [String: String] = ProcessInfo.processInfo.environment,
        dotEnvPath: String = ".env"
    ) async throws -> ConfigReader {
        let secrets = SecretsSpecifier<String, String>.specific(
            Set(Key.allCases.filter(\.isSecret).map(\.environmentVariable)))
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, text) in flags {
            values[AbsoluteConfigKey(key.configKey.split(separator: ".").map(String.init))] = ConfigValue(
                .string(text), isSecret: key.isSecret)
        }
        return ConfigReader(providers: [
            InMemoryProvider(name: "flags", values: values),
            EnvironmentVariablesProvider(environmentVariables: environment, secretsSpecifier: secrets),
            EnvironmentVariablesProvider(environmentVariables: try DotEnvFile.read(atPath: dotEnvPath)?.values ?? [:], secretsSpecifier: secrets),
        ])
    }
}

/// How `serve` writes its log lines to standard error.
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's text lines: `2026-05-01T08:00:00+0000 info ringrelay: key=value … message`.
    case text
    /// One JSON object a line, for log collectors (see ``LineLogHandler``).
    case json
}

/// A configuration value that stops start-up.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The offending key.
    public var key: ServerConfiguration.Key
    /// What is wrong with it.
    public var problem: String

    /// Creates an error.
    public init(key: ServerConfiguration.Key, _ problem: String) {
        self.key = key
        self.problem = problem
    }

    public var description: String {
        "Invalid configuration \(key.flag) / \(key.environmentVariable): \(problem)"
    }
}

/// The most a live connection may have waiting to be written (see `LiveOutboundBudget`).
public struct LiveOutboundLimits: Sendable, Hashable {
    /// Bytes of frames not yet written to the socket.
    public var bytes: Int
    /// Frames not yet written to the socket.
    public var frames: Int

    public init(bytes: Int, frames: Int) {
        self.bytes = bytes
        self.frames = frames
    }
}
