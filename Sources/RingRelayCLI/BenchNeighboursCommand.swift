import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Synchronization

extension BenchCommand {
    /// `ringrelay bench neighbours`: one tenant's requests alone, then while another tenant does the
    /// worst the limits allow, against one `ringrelay serve` child with its default limits.
    struct Neighbours: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "neighbours",
            abstract: "Tenant A's call latency alone and while tenant B does the worst the default limits allow.",
            discussion: """
                Starts `ringrelay serve` (this same executable) as a child on an empty data directory with the \
                server's default limits (100 active bindings an identity, a budget of 100 calls and 100 binding writes \
                a second with bursts of 200 and 500), and two accounts without push credentials, so each delivery \
                is planned, recorded and answered `fix_configuration` without leaving the machine. Tenant A posts \
                --rate calls a second, each to an identity with one binding, for --duration seconds: first alone, \
                then while tenant B, from --b-connections connections as fast as the server answers, calls an \
                identity with as many bindings as allowed, registers bindings in batches of 500, and calls again \
                past its budget (answered 429). Reports A's POST latency in both phases, their ratio, and what B got \
                through. Build with -c release for meaningful figures.
                """)

        @Option(help: "Tenant A's calls per second (open loop).") var rate = 50
        @Option(help: "Seconds of each phase.") var duration = 20
        @Option(help: "Tenant B's connections, each as fast as the server answers.") var bConnections = 8
        @Option(help: "What tenant B does: calls (to its identity at the limit), batches (of 500 bindings), or both.") var bLoad: BLoad = .both

        enum BLoad: String, ExpressibleByArgument, CaseIterable, Codable {
            case calls, batches, both
        }
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard rate > 0, duration > 0, bConnections > 0 else { throw ValidationError("--rate, --duration and --b-connections must be positive.") }
        }

        func run() async throws {
            EventLoopGlobalExecutor.install()
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench-neighbours")
            defer { directory.remove() }
            let server = try BenchServer(dataDirectory: directory.appending("data"), limits: true)
            defer { server.terminate() }
            let result = try await server.withHTTPClient { http in try await measure(http: http, server: server) }
            await server.stop()
            if json {
                print(String(decoding: try JSONEncoder.ringRelay.encode(result), as: UTF8.self))
            } else {
                print(result.summary)
            }
        }

        private func measure(http: HTTPClient, server: BenchServer) async throws -> NeighboursBenchResult {
            let api = Setup(http: http, base: server.base)
            func account(_ name: String) async throws -> String {
                try JSONDecoder.ringRelay.decode(
                    CreatedAccount.self, from: try await api.send(.POST, "/v1/accounts", server.adminToken, #"{"name":"\#(name)"}"#)
                ).apiKey
            }
            let a = try await account("tenant-a")
            let b = try await account("tenant-b")
            _ = try await api.send(.POST, "/v1/bindings", a, #"{"identity":"alice","type":"fcm","token":"a-1"}"#)
            // B's callee at the most bindings an identity may have (the default, 100).
            let items = (0..<100).map { #"{"identity":"big","type":"fcm","token":"big-\#($0)"}"# }.joined(separator: ",")
            _ = try await api.send(.POST, "/v1/bindings/batch", b, #"{"upsert":[\#(items)]}"#)

            let alone = try await tenantA(api: api, key: a)
            let stop = StopFlag()
            let tally = NeighbourTally()
            let neighbour = Task {
                try await withThrowingDiscardingTaskGroup { group in
                    for connection in 0..<bConnections {
                        group.addTask { try await tenantB(api: api, key: b, connection: connection, stop: stop, tally: tally) }
                    }
                }
            }
            let beside = try await tenantA(api: api, key: a)
            stop.raise()
            try await neighbour.value
            return NeighboursBenchResult(
                rate: rate, seconds: duration, bLoad: bLoad.rawValue, aloneP50Ms: alone.p50, aloneP99Ms: alone.p99, aloneFailures: alone.failures,
                besideP50Ms: beside.p50, besideP99Ms: beside.p99, besideFailures: beside.failures,
                p99Ratio: beside.p99 / max(alone.p99, 0.001), bByStatus: tally.byStatus, serverPeakRSSMiB: ProcessMemory.peakResidentMiB(pid: server.pid))
        }

        /// Tenant A's phase: `rate` calls a second for `duration` seconds.
        private func tenantA(api: Setup, key: String) async throws -> (p50: Double, p99: Double, failures: Int) {
            let load = LoadGenerator(count: rate * duration, concurrency: .max, rate: rate)
            let (_, tally) = try await load.run { _ in
                let answer = try? await api.exchange(.POST, "/v1/calls", key, #"{"from":"a-backend","to":"alice"}"#)
                return answer?.status == 201
            }
            let latencies = tally.sorted
            return (percentileMs(latencies, 0.50), percentileMs(latencies, 0.99), tally.failures.withLock { $0 })
        }

        /// One of tenant B's connections: a call to its identity at the limit, a batch of 500
        /// bindings, a call past its budget, and again, until `stop`.
        private func tenantB(api: Setup, key: String, connection: Int, stop: StopFlag, tally: NeighbourTally) async throws {
            var round = 0
            while !stop.isRaised {
                if bLoad != .batches {
                    let call = try? await api.exchange(.POST, "/v1/calls", key, #"{"from":"b-backend","to":"big"}"#)
                    tally.count("calls", call?.status)
                }
                guard bLoad != .calls else { continue }
                let items = (0..<500).map { #"{"identity":"user-\#(connection)-\#(round)-\#($0)","type":"fcm","token":"t-\#(connection)-\#(round)-\#($0)"}"# }
                let batch = try? await api.exchange(.POST, "/v1/bindings/batch", key, #"{"upsert":[\#(items.joined(separator: ","))]}"#)
                tally.count("batches", batch?.status)
                round += 1
            }
        }
    }
}

/// Tells tenant B's connections to stop.
final class StopFlag: Sendable {
    private let raised = Atomic(false)
    func raise() { raised.store(true, ordering: .relaxed) }
    var isRaised: Bool { raised.load(ordering: .relaxed) }
}

/// What tenant B's requests got, by kind and status.
final class NeighbourTally: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    func count(_ kind: String, _ status: Int?) {
        counts.withLock { $0["\(kind) \(status.map(String.init) ?? "failed")", default: 0] += 1 }
    }

    var byStatus: [String: Int] { counts.withLock { $0 } }
}

/// What `bench neighbours` measured.
struct NeighboursBenchResult: Codable {
    var rate: Int
    var seconds: Int
    var bLoad: String
    var aloneP50Ms: Double
    var aloneP99Ms: Double
    var aloneFailures: Int
    var besideP50Ms: Double
    var besideP99Ms: Double
    var besideFailures: Int
    /// Tenant A's p99 beside tenant B over its p99 alone (target: at most 2).
    var p99Ratio: Double
    /// Tenant B's requests by kind and status.
    var bByStatus: [String: Int]
    var serverPeakRSSMiB: Double?

    var summary: String {
        """
        tenant A     \(rate) calls/s for \(seconds) s in each phase
        alone        p50 \(String(format: "%.2f", aloneP50Ms)) ms, p99 \(String(format: "%.2f", aloneP99Ms)) ms, \(aloneFailures) not 201
        beside B     p50 \(String(format: "%.2f", besideP50Ms)) ms, p99 \(String(format: "%.2f", besideP99Ms)) ms, \(besideFailures) not 201
        p99 ratio    \(String(format: "%.2f", p99Ratio))× (target ≤ 2×)
        tenant B     \(bLoad): \(bByStatus.sorted { $0.key < $1.key }.map { "\($0.value) × \($0.key)" }.joined(separator: ", "))
        server       \(serverPeakRSSMiB.map { String(format: "%.0f MiB", $0) } ?? "unknown") peak RSS
        """
    }
}
