import Foundation
import NIOSSL
import PostgresNIO

/// Where a PostgreSQL database is and how to log in: a `postgres://` URL, as libpq takes it.
///
/// `postgres://user:password@host:5432/database?sslmode=prefer`; `postgresql://` works too, the
/// user and password are percent-decoded, and `?host=/path` names a Unix socket directory
/// instead of a host. `sslmode` is `disable`, `prefer` (the default: TLS when the server offers
/// it) or `require` (TLS, with the server's certificate and name verified); `connect_timeout` is
/// the seconds opening a connection may take (default 10).
///
/// The URL holds a password: ``description`` shows it redacted, and no error names the URL.
public struct PostgresDatabaseURL: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// How the connection is secured.
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, prefer, require
    }

    /// The server's host name or address; `nil` with a Unix socket.
    public var host: String?
    /// The server's port.
    public var port: Int
    /// The directory of the server's Unix socket (`?host=/path`), instead of ``host``.
    public var socketDirectory: String?
    /// The role to log in as.
    public var username: String
    /// The role's password, if it has one.
    public var password: String?
    /// The database's name.
    public var database: String
    /// How the connection is secured.
    public var sslMode: SSLMode
    /// How long opening a connection may take, in seconds.
    public var connectTimeout: Int64 = 10

    /// Why a URL was refused. Never quotes the URL, which may hold a password.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Parses a URL.
    ///
    /// - Throws: ``Invalid`` saying what is missing or wrong, without quoting the URL.
    public init(_ text: String) throws(Invalid) {
        guard let components = URLComponents(string: text) else {
            throw Invalid(description: "is not a URL; use postgres://user:password@host:5432/database.")
        }
        guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw Invalid(description: "must start with postgres:// (or postgresql://).")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let unknown = Set(query.keys).subtracting(["sslmode", "host", "connect_timeout"])
        guard unknown.isEmpty else {
            throw Invalid(
                description:
                    "has parameters RingRelay does not know (\(unknown.sorted().joined(separator: ", "))); it knows sslmode, host and connect_timeout."
            )
        }
        if let socket = query["host"], socket.hasPrefix("/") {
            socketDirectory = socket
            host = nil
        } else if let name = components.host, !name.isEmpty {
            host = name
        } else {
            throw Invalid(description: "names no host; use postgres://user:password@host:5432/database.")
        }
        port = components.port ?? 5432
        guard (1...65_535).contains(port) else { throw Invalid(description: "has a port outside 1–65535.") }
        guard let user = components.percentEncodedUser.flatMap({ $0.removingPercentEncoding }), !user.isEmpty else {
            throw Invalid(description: "names no user; use postgres://user:password@host:5432/database.")
        }
        username = user
        password = components.percentEncodedPassword?.removingPercentEncoding
        let name = String(components.percentEncodedPath.dropFirst()).removingPercentEncoding ?? ""
        guard !name.isEmpty, !name.contains("/") else {
            throw Invalid(description: "names no database; use postgres://user:password@host:5432/database.")
        }
        database = name
        guard let mode = SSLMode(rawValue: query["sslmode", default: "prefer"]) else {
            throw Invalid(description: "has an sslmode other than disable, prefer or require.")
        }
        sslMode = mode
        if let text = query["connect_timeout"] {
            guard let seconds = Int64(text), (1...600).contains(seconds) else {
                throw Invalid(description: "has a connect_timeout other than a whole number of seconds from 1 to 600.")
            }
            connectTimeout = seconds
        }
    }

    /// The URL with its password replaced by `***`: safe for logs and messages.
    public var description: String {
        let place = socketDirectory.map { "[\($0)]" } ?? host ?? ""
        return "postgres://\(username)\(password == nil ? "" : ":***")@\(place):\(port)/\(database)"
    }

    public var debugDescription: String { description }

    /// Only the redacted text: `dump` and the description of a value holding this one (the
    /// server's configuration) never show the password.
    public var customMirror: Mirror { Mirror(self, children: ["url": description]) }

    /// The connection configuration postgres-nio takes.
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let socketDirectory {
            configuration = .init(
                unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: username, password: password, database: database)
        } else {
            configuration = .init(host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: try tls())
        }
        configuration.options.connectTimeout = .seconds(connectTimeout)
        return configuration
    }

    private func tls() throws -> PostgresConnection.Configuration.TLS {
        let tls: PostgresConnection.Configuration.TLS =
            switch sslMode {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
        return tls
    }
}
