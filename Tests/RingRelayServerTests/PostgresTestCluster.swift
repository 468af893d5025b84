import Foundation
import Logging
import PostgresNIO
import RingRelayTesting
import Testing

/// A throwaway PostgreSQL server for tests: a cluster of its own in a temporary directory, on a
/// free loopback port, never one someone started by hand.
///
/// `initdb` and `postgres` refuse to run as root, so when the tests run as root the cluster
/// belongs to the `postgres` user (Debian's package creates it) and runs through `runuser`.
/// A watchdog in a session of its own outlives the test process, even one killed or
/// interrupted with Ctrl-C: once the process is gone it stops the server and deletes the
/// directory, so neither servers nor directories pile up.
///
/// Tests share one cluster per process (``shared``), each on a database of its own
/// (``createDatabase()``); a test that stops the server starts a cluster of its own.
final class PostgresTestCluster: Sendable {
    /// The directory holding the data, the socket and the log.
    let directory: String
    /// The server's loopback port.
    let port: Int
    private let binaries: String

    /// The role the tests log in as, and its password (which the tests check never leaks).
    static let user = "ringrelay"
    static let password = "pg-test-secret-7f3a9c"

    /// The cluster the process's tests share, started on first use.
    static let shared = Task { try await PostgresTestCluster.start() }

    private init(directory: String, port: Int, binaries: String) {
        self.directory = directory
        self.port = port
        self.binaries = binaries
    }

    /// Creates and starts a new cluster.
    static func start() async throws -> PostgresTestCluster {
        let binaries = try findBinaries()
        // Under /tmp, which the postgres user can reach (the test's own TMPDIR may not be).
        let directory = "/tmp/ringrelay-pg-\(UUID().uuidString.prefix(8).lowercased())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try Data(password.utf8).write(to: URL(fileURLWithPath: directory + "/password"))
        if geteuid() == 0 {
            for path in [directory, directory + "/password"] {
                try FileManager.default.setAttributes([.ownerAccountName: "postgres", .groupOwnerAccountName: "postgres"], ofItemAtPath: path)
            }
        }
        let cluster = PostgresTestCluster(directory: directory, port: try CLITests.unusedPort(), binaries: binaries)
        try cluster.startWatchdog()
        try await cluster.run(
            "initdb",
            [
                "-D", directory + "/data", "-U", user, "--pwfile=\(directory)/password", "-A", "scram-sha-256", "-E", "UTF8", "--no-locale",
                "--no-sync",
            ])
        try FileManager.default.removeItem(atPath: directory + "/password")
        try await cluster.startServer()
        return cluster
    }

    /// The URL of `database` on this cluster. A test run loads the machine heavily: connections
    /// may take longer than the default 10 s to open.
    func url(database: String) -> String {
        "postgres://\(Self.user):\(Self.password)@127.0.0.1:\(port)/\(database)?sslmode=disable&connect_timeout=120"
    }

    /// Creates a new, empty database and returns its name.
    func createDatabase() async throws -> String {
        let name = "test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        _ = try await rows(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), database: "postgres")
        return name
    }

    /// The first column of the first row `sql` answers in `database`, as a number.
    func query(_ sql: String, database: String) async throws -> Int? {
        try await rows(PostgresQuery(unsafeSQL: sql), database: database).first?.decode(Int.self)
    }

    /// Runs `body` while a transaction of the test's holds `table` of `database` in `EXCLUSIVE`
    /// mode: reads go on, every write to it waits until `body` returns.
    func whileLocked<T>(_ table: String, database: String, _ body: () async throws -> T) async throws -> T {
        let logger = TestLogging.logger("postgres")
        let connection = try await PostgresConnection.connect(
            configuration: .init(host: "127.0.0.1", port: port, username: Self.user, password: Self.password, database: database, tls: .disable),
            id: 0, logger: logger)
        do {
            _ = try await connection.query("BEGIN", logger: logger)
            _ = try await connection.query(PostgresQuery(unsafeSQL: "LOCK TABLE \(table) IN EXCLUSIVE MODE"), logger: logger)
            let result = try await body()
            _ = try await connection.query("ROLLBACK", logger: logger)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private func rows(_ query: PostgresQuery, database: String) async throws -> [PostgresRow] {
        let logger = TestLogging.logger("postgres")
        let connection = try await PostgresConnection.connect(
            configuration: .init(host: "127.0.0.1", port: port, username: Self.user, password: Self.password, database: database, tls: .disable),
            id: 0, logger: logger)
        do {
            let rows = try await connection.query(query, logger: logger).collect()
            try await connection.close()
            return rows
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Starts the server (again), on the same port and data.
    func startServer() async throws {
        let options = [
            "-p \(port)", "-k \(directory)", "-c listen_addresses=127.0.0.1",
            // Throwaway data: no waiting for the disk.
            "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off", "-c max_connections=300",
        ]
        try await run(
            "pg_ctl", ["start", "-D", directory + "/data", "-w", "-t", "120", "-l", directory + "/server.log", "-o", options.joined(separator: " ")])
    }

    /// Stops the server, keeping its data; every connection to it is closed.
    func stopServer() async throws {
        try await run("pg_ctl", ["stop", "-D", directory + "/data", "-m", "fast", "-w", "-t", "120"])
    }

    /// Runs one of the cluster's programs as the cluster's owner and waits for it to finish.
    ///
    /// Foundation's `Process` sees a child end when every copy of a socket it hands the child
    /// is closed, and the server `pg_ctl start` leaves running would hold one forever: bash
    /// closes every descriptor but the standard three before the program runs.
    private func run(_ program: String, _ arguments: [String]) async throws {
        let closeAndRun = #"for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec "$0" "$@""#
        let (executable, all) = Self.asOwner(["/bin/bash", "-c", closeAndRun, binaries + "/" + program] + arguments)
        let result = try await ServerProcess.run(all, directory: "/", executable: URL(fileURLWithPath: executable))
        guard result.status == 0 else {
            throw Failure(description: "\(program) failed (\(result.status)): \(result.stdout) \(result.stderr)")
        }
    }

    /// Starts the watchdog: a shell in a session of its own that waits for this process to end,
    /// then stops the server and deletes the directory. It ignores the signals a Ctrl-C or a
    /// hang-up sends the test's process group, so that it is still there to clean up.
    private func startWatchdog() throws {
        let script = """
            trap '' INT HUP TERM
            while [ -d "/proc/$1" ]; do sleep 1; done
            "$2/pg_ctl" stop -D "$3/data" -m immediate >/dev/null 2>&1
            rm -rf "$3"
            """
        let (executable, arguments) = Self.asOwner(["/usr/bin/setsid", "/bin/sh", "-c", script, "watchdog", "\(getpid())", binaries, directory])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// `command` run as the `postgres` user when this process is root, else as it is.
    private static func asOwner(_ command: [String]) -> (executable: String, arguments: [String]) {
        guard geteuid() == 0 else { return (command[0], Array(command.dropFirst())) }
        let runuser = ["/usr/sbin/runuser", "/sbin/runuser"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/runuser"
        return (runuser, ["-u", "postgres", "--"] + command)
    }

    /// The newest installed server's programs: Debian keeps them in /usr/lib/postgresql/N/bin;
    /// elsewhere `pg_config --bindir` says.
    private static func findBinaries() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        if let newest = versions.last(where: { FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/initdb") }) {
            return "\(root)/\(newest)/bin"
        }
        if let (status, output) = try? Command.run("/usr/bin/env", ["pg_config", "--bindir"]), status == 0 {
            let bindir = output.trimmingCharacters(in: .whitespacesAndNewlines)
            if FileManager.default.isExecutableFile(atPath: bindir + "/initdb") { return bindir }
        }
        throw Failure(description: "No PostgreSQL server programs (initdb, pg_ctl) found; scripts/test installs Debian's postgresql package.")
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }
}
