import ArgumentParser
import Crypto
import Foundation
import Logging
import Metrics
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM
import RingRelayTesting
import Synchronization

/// `ringrelay bench …`: measure delivery paths on this machine.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench", abstract: "Measure push, webhook and live-connection throughput and latency on this machine.",
        subcommands: [APNs.self, FCM.self, Fanout.self, Webhooks.self, Live.self, LiveDevices.self, Sealed.self, Executor.self, Neighbours.self])

    struct APNs: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apns",
            abstract: "Push through the real APNs client to the APNs simulator over HTTP/2+TLS on loopback.",
            discussion: """
                Without --rate, keeps --concurrency pushes in flight and reports the throughput. With --rate, \
                starts pushes at that steady rate (open loop) and reports latency at that load. Build with \
                -c release for meaningful figures.
                """)

        @Option(help: "Pushes to send.") var count = 20_000
        @Option(help: "Pushes in flight at once (closed loop).") var concurrency = 200
        @Option(help: "Pushes per second to start (open loop); 0 = as fast as the concurrency allows.") var rate = 0
        @Option(help: "Payload size in bytes (at most 5120).") var payloadBytes = 256
        @Option(help: "Push to this HTTP/2 server (an nginx, say) instead of the simulator, e.g. https://127.0.0.1:9443.")
        var endpoint: String?
        @Option(help: "PEM certificates to trust for --endpoint.") var caFile: String?
        @Option(help: "Pushes sent before the measurement (opens the connections, mints the token).") var warmUp = 200
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard count > 0, concurrency > 0, rate >= 0, warmUp >= 0 else { throw ValidationError("count and concurrency must be positive.") }
            guard (16...5120).contains(payloadBytes) else { throw ValidationError("--payload-bytes must be 16…5120.") }
            if endpoint != nil, caFile == nil { throw ValidationError("--endpoint needs --ca-file, the certificate to trust.") }
        }

        func run() async throws {
            let key = P256.Signing.PrivateKey()
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench")
            defer { directory.remove() }
            var simulator: APNsSimulator?
            var configuration = APNsConfiguration()
            if let endpoint, let caFile {
                configuration.productionEndpoint = endpoint
                configuration.extraTrustRootsFile = caFile
            } else {
                let started = try APNsSimulator()
                try await started.start()
                let caFile = directory.appending("apns-simulator.pem")
                try started.writeCertificate(toFile: caFile)
                started.registerSigningKey(teamID: "BENCH12345", keyID: "BENCHKEY01", publicKey: key.publicKey, topics: ["com.example.bench"])
                configuration.productionEndpoint = started.url
                configuration.extraTrustRootsFile = caFile
                simulator = started
            }
            configuration.sandboxEndpoint = configuration.productionEndpoint
            let client = try APNsClient(
                configuration: configuration, clock: SystemWallClock(), logger: Logger(label: "bench"), metricsFactory: NOOPMetricsHandler.instance)
            let credential = APNsCredential(
                authentication: .token(teamID: "BENCH12345", keyID: "BENCHKEY01", privateKeyPEM: key.pemRepresentation), topic: "com.example.bench")
            let padding = String(repeating: "x", count: max(0, payloadBytes - 40))
            let payload = Array(#"{"aps":{},"ringrelay":{"pad":"\#(padding)"}}"#.utf8)
            let tokens = (0..<1000).map { seed in (0..<32).map { String(format: "%02x", ($0 &* 31 &+ seed) & 0xFF) }.joined() }

            // Warm up: open the connection and mint the provider token outside the measurement.
            for index in 0..<warmUp { _ = await Self.push(client, credential, tokens[index % tokens.count], payload) }
            simulator?.reset()

            let load = LoadGenerator(count: count, concurrency: concurrency, rate: rate)
            let (elapsed, tally) = try await load.run { index in
                await Self.push(client, credential, tokens[index % tokens.count], payload).disposition == .delivered
            }
            await client.shutdown()
            try await simulator?.shutdown()
            let result = BenchResult(load: load, elapsed: elapsed, tally: tally, payloadBytes: payload.count)
            try emit(result, summary: result.summary, json: json)
        }

        private static func push(_ client: APNsClient, _ credential: APNsCredential, _ token: String, _ payload: [UInt8]) async -> PushOutcome {
            guard let request = try? APNsRequest(kind: .voip, bundleID: credential.topic, deviceToken: token, payload: payload) else {
                return PushOutcome(disposition: .drop, status: nil, reason: "BadRequest", providerID: nil, latency: .zero)
            }
            return await client.push(
                request, credential: credential, environment: .production, environmentIsCertain: true,
                deadline: Date().addingTimeInterval(30))
        }
    }
}

extension BenchCommand {
    struct FCM: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fcm",
            abstract: "Send through the real FCM client to the FCM simulator over TLS (HTTP/2) on loopback.",
            discussion: """
                Without --rate, keeps --concurrency messages in flight and reports the throughput. With --rate, \
                starts messages at that steady rate (open loop) and reports latency at that load. The OAuth token \
                is minted once, before the measurement. Build with -c release for meaningful figures.
                """)

        @Option(help: "Messages to send.") var count = 20_000
        @Option(help: "Messages in flight at once (closed loop).") var concurrency = 200
        @Option(help: "Messages per second to start (open loop); 0 = as fast as the concurrency allows.") var rate = 0
        @Option(help: "Data payload size in bytes, keys and values (at most 4096).") var payloadBytes = 256
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard count > 0, concurrency > 0, rate >= 0 else { throw ValidationError("count and concurrency must be positive.") }
            guard (16...FCMRequest.maxDataBytes).contains(payloadBytes) else { throw ValidationError("--payload-bytes must be 16…4096.") }
        }

        func run() async throws {
            let simulator = try FCMSimulator()
            try await simulator.start()
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench")
            defer { directory.remove() }
            let caFile = directory.appending("fcm-simulator.pem")
            try simulator.writeCertificate(toFile: caFile)
            let account = try simulator.makeServiceAccount(projectID: "ringrelay-bench")
            let credential = FCMCredential(
                serviceAccountJSON: String(decoding: try JSONSerialization.data(withJSONObject: account, options: .sortedKeys), as: UTF8.self),
                projectID: account["project_id"] ?? "", clientEmail: account["client_email"] ?? "", tokenURI: account["token_uri"] ?? "")
            var configuration = FCMConfiguration()
            configuration.endpoint = simulator.url
            configuration.extraTrustRootsFile = caFile
            let client = try FCMClient(
                configuration: configuration, clock: SystemWallClock(), logger: Logger(label: "bench"), metricsFactory: NOOPMetricsHandler.instance)
            let data = ["ringrelay": String(repeating: "x", count: payloadBytes - "ringrelay".utf8.count)]
            let tokens = (0..<1000).map { seed in "bench\(seed):APA91b" + String(repeating: "Q", count: 140) }

            // Warm up: open the connection and mint the access token outside the measurement.
            for index in 0..<200 { _ = await Self.push(client, credential, tokens[index % tokens.count], data) }
            simulator.reset()

            let load = LoadGenerator(count: count, concurrency: concurrency, rate: rate)
            let (elapsed, tally) = try await load.run { index in
                await Self.push(client, credential, tokens[index % tokens.count], data).disposition == .delivered
            }
            let mints = simulator.tokenMints
            await client.shutdown()
            try await simulator.shutdown()
            let result = BenchResult(load: load, elapsed: elapsed, tally: tally, payloadBytes: FCMRequest.dataSize(data))
            try emit(result, summary: result.summary + "\noauth       \(mints) access token(s) minted during the measurement", json: json)
        }

        private static func push(_ client: FCMClient, _ credential: FCMCredential, _ token: String, _ data: [String: String]) async
            -> PushOutcome
        {
            let deadline = Date().addingTimeInterval(30)
            guard let request = try? FCMRequest(token: token, data: data, expiresAt: deadline, now: Date()) else {
                return PushOutcome(disposition: .drop, status: nil, reason: "BadRequest", providerID: nil, latency: .zero)
            }
            return await client.push(request, credential: credential, deadline: deadline)
        }
    }
}

/// What a benchmark run measured.
struct BenchResult: Codable {
    var pushes: Int
    var failures: Int
    var seconds: Double
    var pushesPerSecond: Double
    var targetRate: Int
    var concurrency: Int?
    var payloadBytes: Int
    var p50Ms: Double
    var p90Ms: Double
    var p99Ms: Double
    var maxMs: Double
    var peakRSSMiB: Double?

    var summary: String {
        let load = targetRate > 0 ? "open loop at \(targetRate)/s" : "closed loop, \(concurrency ?? 0) in flight"
        return """
            pushes      \(pushes) (\(failures) failed), \(payloadBytes)-byte payloads, \(load)
            throughput  \(String(format: "%.0f", pushesPerSecond)) pushes/s over \(String(format: "%.2f", seconds)) s
            latency     p50 \(String(format: "%.2f", p50Ms)) ms, p90 \(String(format: "%.2f", p90Ms)) ms, p99 \(String(format: "%.2f", p99Ms)) ms, max \(String(format: "%.2f", maxMs)) ms
            peak RSS    \(peakRSSMiB.map { String(format: "%.0f MiB", $0) } ?? "unknown") (client and simulator in one process)
            """
    }
}

/// Reads this process's memory figures from /proc (Linux).
enum ProcessMemory {
    /// Peak resident set size (`VmHWM`) of a process (this one by default), in MiB.
    static func peakResidentMiB(pid: Int32? = nil) -> Double? {
        statusMiB("VmHWM", pid: pid)
    }

    /// CPU time (user and system) a process has used so far, in seconds, from `/proc/<pid>/stat`.
    static func cpuSeconds(pid: Int32) -> Double? {
        guard let stat = procText("/proc/\(pid)/stat"), let end = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// CPU time (user and system) of every PostgreSQL process on this machine so far, in seconds,
    /// those that ended included (a parent's `cutime`/`cstime` hold its waited children's); `nil`
    /// when none runs. The benchmarks' database is the only one expected on the machine.
    static func postgresCPUSeconds() -> Double? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        var total = 0.0
        var found = false
        for entry in entries where entry.allSatisfy(\.isNumber) {
            guard let stat = procText("/proc/\(entry)/stat"), let open = stat.firstIndex(of: "("), let end = stat.lastIndex(of: ")"),
                stat[stat.index(after: open)..<end] == "postgres"
            else { continue }
            // Fields after the command name: utime 14, stime 15, cutime 16, cstime 17.
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 14 else { continue }
            total += fields[11...14].compactMap { Double($0) }.reduce(0, +)
            found = true
        }
        return found ? total / Double(sysconf(Int32(_SC_CLK_TCK))) : nil
    }

    /// The memory allocator a process runs on, from the libraries it mapped: `jemalloc` when
    /// `LD_PRELOAD=libjemalloc.so.2` put it in (as the container image does), else glibc's.
    static func allocator(pid: Int32) -> String {
        guard let maps = procText("/proc/\(pid)/maps") else { return "unknown" }
        if maps.contains("/libjemalloc.so") { return "jemalloc" }
        if maps.contains("/libtcmalloc") { return "tcmalloc" }
        return "glibc malloc"
    }

    /// Resident set size (`VmRSS`) of a process now, in MiB.
    static func residentMiB(pid: Int32) -> Double? {
        statusMiB("VmRSS", pid: pid)
    }

    /// A kB field of `/proc/<pid>/status`, in MiB.
    private static func statusMiB(_ field: String, pid: Int32?) -> Double? {
        let path = pid.map { "/proc/\($0)/status" } ?? "/proc/self/status"
        guard let status = procText(path), let kilobytes = numbers(status)[Substring(field)] else { return nil }
        return Double(kilobytes) / 1024
    }

    /// The `name: number` lines of a `/proc` file (`status`, `io`), each number without its unit
    /// (`VmRSS:    1234 kB` → 1234).
    static func numbers(_ text: String) -> [Substring: Int] {
        var fields: [Substring: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, let value = parts[1].split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) }) {
                fields[parts[0]] = value
            }
        }
        return fields
    }

    /// A `/proc` file's text, read to its end: those files report size 0, and
    /// `String(contentsOfFile:)` stopped early on a long one (a process's `maps`).
    static func procText(_ path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let data = try? handle.readToEnd() else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
