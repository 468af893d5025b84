import Configuration
import Foundation
import Logging
import RingRelayAPNs
import SystemPackage

/// Everything `ringrelay serve` can be configured with, validated.
///
/// Values come from one `ConfigReader` whose providers are, in order: command-line flags,
/// environment variables, a `.env` file, then the defaults below. Keys are `ringrelay.<name>`,
/// which the environment provider spells `RINGRELAY_<NAME>` (`ringrelay.data-dir` →
/// `RINGRELAY_DATA_DIR`). Every value is read as text and parsed here, so a bad value stops
/// start-up with a message naming both the flag and the variable.
public struct ServerConfiguration: Sendable {
    /// Address to listen on.
    public var host: String = "127.0.0.1"
    /// Port to listen on; 0 picks a free port.
    public var port: Int = 8080
    /// Where the SQLite database, the admin token and the signing key live.
    public var dataDirectory: String = "./ringrelay-data"
    /// Admin token; when `nil` one is generated on first start and kept in the data directory.
    public var adminToken: String?
    /// Log level.
    public var logLevel: Logger.Level = .info
    /// Largest request body accepted, in bytes.
    public var maxBodyBytes: Int = 64 * 1024
    /// Longest lifetime a device access token may ask for.
    public var maxAccessTokenTTL: Int = 86_400
    /// How APNs is reached (endpoints, extra trust roots, timeouts).
    public var apns = APNsConfiguration()

    /// The defaults.
    public init() {}

    /// The keys, as documented in the README's configuration table.
    public enum Key: String, CaseIterable, Sendable {
        case host, port
        case dataDir = "data-dir"
        case adminToken = "admin-token"
        case logLevel = "log-level"
        case apnsEndpointProduction = "apns-endpoint-production"
        case apnsEndpointSandbox = "apns-endpoint-sandbox"
        case pushCAFile = "push-ca-file"
        case apnsTimeout = "apns-timeout"

        /// The swift-configuration key, e.g. `ringrelay.data-dir`.
        public var configKey: String { "ringrelay.\(rawValue)" }
        /// The command-line flag, e.g. `--data-dir`.
        public var flag: String { "--\(rawValue)" }
        /// The environment variable, e.g. `RINGRELAY_DATA_DIR`.
        public var environmentVariable: String {
            "RINGRELAY_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
        }
        /// Whether the value is a secret (redacted by the reader).
        public var isSecret: Bool { self == .adminToken }
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
        if let text = value(.apnsEndpointProduction) { apns.productionEndpoint = try Self.url(text, key: .apnsEndpointProduction) }
        if let text = value(.apnsEndpointSandbox) { apns.sandboxEndpoint = try Self.url(text, key: .apnsEndpointSandbox) }
        if let path = value(.pushCAFile) {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw ConfigurationError(key: .pushCAFile, "cannot read '\(path)'; pass a PEM file of certificates to trust.")
            }
            apns.extraTrustRootsFile = path
        }
        if let text = value(.apnsTimeout) {
            guard let seconds = Double(text), seconds > 0, seconds <= 60 else {
                throw ConfigurationError(key: .apnsTimeout, "must be a number of seconds from 0 to 60, got '\(text)'.")
            }
            apns.requestTimeout = .milliseconds(Int64(seconds * 1000))
        }
    }

    private static func url(_ text: String, key: Key) throws(ConfigurationError) -> String {
        guard let url = URL(string: text), url.scheme == "https", url.host != nil, url.path.isEmpty || url.path == "/" else {
            throw ConfigurationError(key: key, "must be an https URL without a path, such as https://api.push.apple.com, got '\(text)'.")
        }
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    /// A reader over flags, then the environment, then `.env` in the working directory.
    ///
    /// - Parameter flags: values given on the command line, by key.
    /// - Throws: when `.env` exists but cannot be parsed.
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
            try await EnvironmentVariablesProvider(environmentFilePath: .init(dotEnvPath), allowMissing: true, secretsSpecifier: secrets),
        ])
    }
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
