import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOFoundationEssentialsCompat
import NIOHTTP1
import RingRelayCore
import RingRelayTesting
import RingRelayWire

extension InteropDoorKind: ExpressibleByArgument {
    /// `nginx-direct`, `nginx-tls-front`, `haproxy`, `nghttpx`, `h2o`, `chaos`.
    var argumentName: String {
        switch self {
        case .nginxDirect: "nginx-direct"
        case .nginxTLSFront: "nginx-tls-front"
        default: rawValue
        }
    }

    public init?(argument: String) {
        guard let kind = Self.allCases.first(where: { $0.argumentName == argument }) else { return nil }
        self = kind
    }

    public var defaultValueDescription: String { argumentName }
    public static var allValueStrings: [String] { allCases.map(\.argumentName) }
}

extension BenchCommand {
    /// `ringrelay bench fanout`: one call to thousands of `apns_voip` bindings, through a real
    /// server process, to an HTTP/2 server RingRelay did not write (nginx).
    struct Fanout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fanout",
            abstract: "One call to --devices apns_voip bindings through a `ringrelay serve` child process, to nginx as the APNs endpoint.",
            discussion: """
                Starts a door (--door; nginx by default, Debian's, answering 200 to every POST /3/device/…; the \
                others put nginx's own TLS front, HAProxy, nghttpx or a byte-chaos proxy before it, or are h2o), \
                or uses --endpoint and --ca-file for a server you run. Starts `ringrelay serve` \
                (this same executable) as a child on an empty data directory pointed at it, creates an account with \
                APNs token credentials, one identity with --devices apns_voip bindings and, to warm up (connection, \
                provider token), a second identity with one. Then places one call with POST /v1/calls and times it, \
                on a monotonic clock polled every 200 µs, until the door's server has logged every push (or, with \
                --endpoint, until the server's own ringrelay_push_total counts every push answered, polled every \
                2 ms). Reports pushes/s, requests at the door's server, duplicates and the server's CPU time per \
                push. Build with -c release.
                """)

        @Option(help: "apns_voip bindings of the callee.") var devices = 10_000
        @Option(help: "The door to start as the APNs endpoint: \(InteropDoorKind.allValueStrings.joined(separator: ", ")).")
        var door: InteropDoorKind = .nginxDirect
        @Option(help: "Use this HTTP/2 endpoint instead of starting a door, e.g. https://127.0.0.1:9443.") var endpoint: String?
        @Option(help: "PEM certificates to trust for --endpoint.") var caFile: String?
        @Option(help: "Calls to place, one after another (each to every binding).") var calls = 3
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard devices > 0, calls > 0 else { throw ValidationError("--devices and --calls must be positive.") }
            if (endpoint == nil) != (caFile == nil) { throw ValidationError("--endpoint and --ca-file go together.") }
        }

        func run() async throws {
            var nginx: InteropDoor?
            let url: String
            let trust: String
            if let endpoint, let caFile {
                (url, trust) = (endpoint, caFile)
            } else {
                let started = try await InteropDoor.start(door, maxConcurrentStreams: 1000)
                nginx = started
                (url, trust) = (started.url, started.caFile)
            }
            defer { nginx?.stop() }
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench-fanout")
            defer { directory.remove() }
            let server = try BenchServer(
                dataDirectory: directory.appending("data"),
                arguments: ["--apns-endpoint-production", url, "--apns-endpoint-sandbox", url, "--push-ca-file", trust, "--log-level", "info"])
            defer { server.terminate() }
            let result = try await server.withHTTPClient { http in
                try await measure(http: http, server: server, nginx: nginx)
            }
            await server.stop()
            try emit(result, summary: result.summary, json: json)
        }

        private func measure(http: HTTPClient, server: BenchServer, nginx: InteropDoor?) async throws -> FanoutBenchResult {
            let api = Setup(http: http, base: server.base)
            let account = try await server.createAccount(http: http)
            let key = account.apiKey
            let apns = try JSONSerialization.data(withJSONObject: [
                "teamId": "BENCH12345", "keyId": "BENCHKEY01", "privateKey": P256.Signing.PrivateKey().pemRepresentation,
                "topic": "com.example.bench",
            ])
            _ = try await api.send(.PUT, "/v1/credentials/apns", key, String(decoding: apns, as: UTF8.self))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<devices {
                    if index >= 32 { try await group.next() }
                    group.addTask {
                        let token = String(format: "%08x", index) + String(repeating: "be", count: 28)
                        _ = try await api.send(
                            .POST, "/v1/bindings", key, #"{"identity":"callee","type":"apns_voip","token":"\#(token)","environment":"production"}"#)
                    }
                }
                try await group.waitForAll()
            }
            let warmToken = String(repeating: "ff", count: 32)
            _ = try await api.send(.POST, "/v1/bindings", key, #"{"identity":"warm","type":"apns_voip","token":"\#(warmToken)","environment":"production"}"#)
            _ = try await api.send(.POST, "/v1/calls", key, #"{"from":"bench","to":"warm"}"#)
            try await Task.sleep(for: .milliseconds(500))

            var runs: [FanoutBenchResult.Run] = []
            for _ in 0..<calls {
                let before = nginx?.loggedRequestCount() ?? 0
                let pushedBefore = nginx == nil ? try await Self.pushesAnswered(api: api, adminToken: server.adminToken) : 0
                let workBefore = ProcessWork.of(pid: server.pid)
                let started = ContinuousClock.now
                // The answer lists every delivery (megabytes for 10,000): it is decoded after the
                // clock stops, so this process's JSON decoding does not compete with the server
                // and nginx for the two cores while the pushes go out.
                let answer = try await Self.exchange(.POST, "/v1/calls", body: #"{"from":"bench","to":"callee"}"#, api: api, key: key)
                var arrived = 0
                let deadline = ContinuousClock.now + .seconds(60)
                if let nginx {
                    // The door's server logs each request as it answers: poll its log (read
                    // incrementally) on a monotonic clock.
                    while arrived < devices, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .microseconds(200))
                        arrived = nginx.loggedRequestCount() - before
                    }
                } else {
                    // A server of unknown make: the RingRelay server's own count of answered pushes.
                    while try await Self.pushesAnswered(api: api, adminToken: server.adminToken) - pushedBefore < devices, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(2))
                    }
                }
                let elapsed = ContinuousClock.now - started
                let work = workBefore.flatMap { before in ProcessWork.of(pid: server.pid)?.per(devices, since: before) }
                let call = try JSONDecoder.ringRelay.decode(CallResource.self, from: answer)
                // Every delivery's answer, as the API reports it (write-behind: give it a moment).
                var outcomes: [String: Int] = [:]
                while ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(200))
                    let deliveries = try await Self.deliveries(of: call.id, api: api, key: key)
                    outcomes = Dictionary(deliveries.map { ($0.outcome, 1) }, uniquingKeysWith: +)
                    if outcomes["pending", default: 0] == 0, deliveries.count == devices { break }
                }
                runs.append(
                    FanoutBenchResult.Run(
                        seconds: elapsed.timeInterval, pushesPerSecond: Double(devices) / elapsed.timeInterval, arrivedAtServer: nginx == nil ? nil : arrived,
                        duplicates: nginx.map { Self.duplicates(in: $0, after: before) }, outcomes: outcomes,
                        serverCPUMicrosecondsPerPush: work?.cpuMicroseconds ?? 0, serverWork: work))
            }
            return FanoutBenchResult(
                devices: devices, endpoint: nginx == nil ? "external" : door.argumentName, runs: runs,
                peakRSSMiB: ProcessMemory.peakResidentMiB(pid: server.pid), allocator: ProcessMemory.allocator(pid: server.pid))
        }

        /// `method path` answered with a call resource, which lists every delivery, so it can be megabytes.
        private static func call(_ method: HTTPMethod, _ path: String, body: String = "", api: Setup, key: String) async throws -> CallResource {
            try JSONDecoder.ringRelay.decode(CallResource.self, from: try await exchange(method, path, body: body, api: api, key: key))
        }

        /// Every delivery of the call, page by page (500 a page).
        private static func deliveries(of callID: String, api: Setup, key: String) async throws -> [DeliveryResource] {
            var all: [DeliveryResource] = []
            var cursor: String?
            repeat {
                let query = cursor.map { "?cursor=\($0)" } ?? ""
                let page = try JSONDecoder.ringRelay.decode(
                    DeliveryList.self, from: try await exchange(.GET, "/v1/calls/\(callID)/deliveries\(query)", api: api, key: key))
                all += page.data
                cursor = page.nextCursor
            } while cursor != nil
            return all
        }

        /// `method path`'s answer body, undecoded; throws unless the status is 2xx.
        private static func exchange(_ method: HTTPMethod, _ path: String, body: String = "", api: Setup, key: String) async throws -> Data {
            let (status, data) = try await api.exchange(method, path, key, body, limit: 64 << 20)
            guard (200..<300).contains(status) else {
                throw ValidationError("\(method) \(path) failed: \(status) \(String(decoding: data, as: UTF8.self))")
            }
            return data
        }

        /// Pushes the server has had answered (or given up), by its `/metrics`: the sum of every
        /// `ringrelay_push_total` series.
        private static func pushesAnswered(api: Setup, adminToken: String) async throws -> Int {
            let (status, body) = try await api.exchange(.GET, "/metrics", adminToken, "")
            guard status == 200 else { throw ValidationError("GET /metrics answered \(status).") }
            var total = 0.0
            for line in String(decoding: body, as: UTF8.self).split(separator: "\n") where line.hasPrefix("ringrelay_push_total{") {
                if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { total += value }
            }
            return Int(total)
        }

        /// Requests of this call the door's server received more than once (for the same device token).
        private static func duplicates(in nginx: InteropDoor, after before: Int) -> Int {
            let received = nginx.processedRequests().dropFirst(before)
            return received.count - Set(received).count
        }
    }
}

/// What a fan-out benchmark measured.
struct FanoutBenchResult: Codable {
    struct Run: Codable {
        var seconds: Double
        var pushesPerSecond: Double
        var arrivedAtServer: Int?
        var duplicates: Int?
        var outcomes: [String: Int]
        var serverCPUMicrosecondsPerPush: Double
        /// The server's system calls, bytes written and context switches per push: steadier run to run than its CPU.
        var serverWork: WorkPerUnit?
    }

    var devices: Int
    var endpoint: String
    var runs: [Run]
    var peakRSSMiB: Double?
    /// The server's memory allocator (``ProcessMemory/allocator(pid:)``).
    var allocator: String?

    var summary: String {
        var lines = ["one call to \(devices) apns_voip bindings, \(endpoint) as the APNs endpoint"]
        for (index, run) in runs.enumerated() {
            let outcomes = run.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append(
                "call \(index + 1)      \(String(format: "%.0f", run.pushesPerSecond)) pushes/s (\(String(format: "%.3f", run.seconds)) s), "
                    + "at the server \(run.arrivedAtServer.map(String.init) ?? "n/a"), duplicates \(run.duplicates.map(String.init) ?? "n/a"); "
                    + "server CPU \(String(format: "%.1f", run.serverCPUMicrosecondsPerPush)) µs/push; deliveries: \(outcomes)")
            if let work = run.serverWork?.text(per: "push") { lines.append("  work      \(work)") }
        }
        lines.append("peak RSS    \(peakRSSMiB.map { String(format: "%.0f MiB", $0) } ?? "unknown") (server, \(allocator ?? "unknown allocator"))")
        return lines.joined(separator: "\n")
    }
}
