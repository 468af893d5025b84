import ArgumentParser
import Foundation
import RingRelayTesting

/// The `ringrelay serve` children of a benchmark: one on its own SQLite file, or several sharing a
/// PostgreSQL database (`--instances N --database-url …`), each on its own port and data directory.
///
/// The database URL reaches the children through their environment (`RINGRELAY_DATABASE_URL`),
/// never their command line, where `ps` would show its password.
struct BenchInstances {
    let servers: [BenchServer]

    /// Starts `count` servers; the first alone, so that it runs the migrations before the others open the database.
    init(count: Int, databaseURL: String?, directory: TemporaryDirectory) throws {
        precondition(count == 1 || databaseURL != nil, "several instances share a PostgreSQL database")
        let environment = databaseURL.map { ["RINGRELAY_DATABASE_URL": $0] } ?? [:]
        var servers: [BenchServer] = []
        do {
            for number in 0..<count {
                servers.append(try BenchServer(dataDirectory: directory.appending("data-\(number)"), environment: environment))
            }
        } catch {
            servers.forEach { $0.terminate() }
            throw error
        }
        self.servers = servers
    }

    var count: Int { servers.count }
    var first: BenchServer { servers[0] }

    /// Each instance's resident set now (MiB), `nil` for one that is gone.
    func residentMiB() -> [Double?] { servers.map { ProcessMemory.residentMiB(pid: $0.pid) } }

    /// Each instance's peak resident set (MiB), `nil` for one that is gone.
    func peakResidentMiB() -> [Double?] { servers.map { ProcessMemory.peakResidentMiB(pid: $0.pid) } }

    /// CPU seconds used by the instances still running, together.
    func cpuSeconds() -> Double { servers.compactMap { ProcessMemory.cpuSeconds(pid: $0.pid) }.reduce(0, +) }

    /// Kills instance `number` at once (`SIGKILL`: no drain, no goodbye to the others).
    func kill(_ number: Int) {
        Foundation.kill(servers[number].pid, SIGKILL)
        servers[number].process.waitUntilExit()
    }

    /// Stops every instance still running, as an operator would.
    func stop() async {
        for server in servers { await server.stop() }
    }

    func terminate() { servers.forEach { $0.terminate() } }
}

/// A benchmark's `--database-url`, or `RINGRELAY_DATABASE_URL` from its environment.
func benchDatabaseURL(_ option: String?) -> String? {
    option ?? ProcessInfo.processInfo.environment["RINGRELAY_DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
}
