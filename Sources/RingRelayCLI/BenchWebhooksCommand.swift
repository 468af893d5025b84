import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOFoundationEssentialsCompat
import NIOHTTP1
import RingRelayCore
import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Synchronization

extension BenchCommand {
    /// `ringrelay bench webhooks`: signed Twilio webhooks into a real server process, each one
    /// push, to the APNs simulator (arrivals timed) or to nginx (arrivals counted from its log).
    struct Webhooks: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "webhooks",
            abstract: "Signed Twilio webhooks into a `ringrelay serve` child process, each one push; open loop at --rate, or wrk at full speed.",
            discussion: """
                Starts the APNs endpoint (--apns simulator: in this process, timing each push's arrival; --apns nginx: \
                Debian's nginx answering 200, counting pushes and their apns-ids in its log) and `ringrelay serve` (this \
                same executable) as a child on an empty data directory, with info-level logs. Sets up an account with \
                APNs and Twilio credentials and --callees identities with one VoIP binding each. Then either sends \
                webhooks at --rate for --duration seconds from this process (open loop), or, with --wrk, runs wrk as a \
                second process sending --count distinct pre-signed webhooks over --connections keep-alive connections \
                as fast as the server answers (closed loop). A webhook's answer waits for its push's answer, so its \
                response time bounds the time to push from above. Reports webhooks/s, errors, latencies, pushes that \
                arrived (and, with nginx, any sent twice), the server's CPU time per webhook and its peak RSS. Build \
                with -c release for meaningful figures.
                """)

        enum Endpoint: String, ExpressibleByArgument, CaseIterable {
            case simulator, nginx
        }

        @Option(help: "The APNs endpoint: simulator or nginx.") var apns: Endpoint = .simulator
        @Option(help: "Webhooks per second (open loop).") var rate = 1000
        @Option(help: "Seconds of load (open loop).") var duration = 60
        @Flag(help: "Send with wrk from a second process as fast as the server answers (apt-get install wrk).") var wrk = false
        @Option(help: "Webhooks wrk sends, each once.") var count = 100_000
        @Option(help: "wrk's keep-alive connections.") var connections = 64
        @Option(help: "wrk's threads.") var wrkThreads = 1
        @Option(help: "Distinct callees (one VoIP binding each).") var callees = 100
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard rate > 0, duration > 0, callees > 0, count > 0, connections > 0, wrkThreads > 0 else {
                throw ValidationError("--rate, --duration, --count, --connections, --wrk-threads and --callees must be positive.")
            }
            if wrk, apns != .nginx { throw ValidationError("--wrk counts pushes at nginx: add --apns nginx.") }
        }

        func run() async throws {
            // The open loop sends from this process, on the same two cores as the server: its
            // tasks run on NIO's event loops as the server's do, not on a pool of their own that
            // every request hopped to and back (that made the load cost ~460 µs a webhook here).
            EventLoopGlobalExecutor.install()
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench-webhooks")
            defer { directory.remove() }
            let arrivals = Arrivals()
            let signingKey = P256.Signing.PrivateKey()
            var simulator: APNsSimulator?
            var nginx: InteropServer?
            let url: String
            let caFile: String
            switch apns {
            case .simulator:
                var simulatorConfiguration = APNsSimulator.Configuration()
                // Arrivals are timed by the callback; keeping pushes would only cost the load's own CPU.
                simulatorConfiguration.maximumRecordedPushes = 0
                simulatorConfiguration.onPush = { push in
                    if let id = Self.messageID(in: push.payload) { arrivals.arrived(id) }
                }
                let started = try APNsSimulator(configuration: simulatorConfiguration)
                try await started.start()
                started.registerSigningKey(teamID: "BENCH12345", keyID: "BENCHKEY01", publicKey: signingKey.publicKey, topics: ["com.example.bench"])
                caFile = directory.appending("apns.pem")
                try started.writeCertificate(toFile: caFile)
                url = started.url
                simulator = started
            case .nginx:
                let started = try await InteropServer.nginx(maxConcurrentStreams: 1000)
                (url, caFile) = (started.url, started.caFile)
                nginx = started
            }
            defer { nginx?.stop() }
            let server = try BenchServer(
                dataDirectory: directory.appending("data"),
                arguments: ["--apns-endpoint-production", url, "--apns-endpoint-sandbox", url, "--push-ca-file", caFile, "--log-level", "info"])
            defer { server.terminate() }

            var result = try await server.withHTTPClient { http in
                let webhook = try await prepare(http: http, server: server, signingKey: signingKey)
                let before = nginx?.loggedRequestCount() ?? 0
                let workBefore = ProcessWork.of(pid: server.pid)
                var result: WebhookBenchResult
                if wrk, let nginx {
                    result = try await measureWithWrk(webhook: webhook, directory: directory, nginx: nginx)
                } else {
                    result = try await measureOpenLoop(webhook: webhook, arrivals: arrivals)
                }
                // The last pushes' arrivals (nginx logs a request once it has answered it).
                let deadline = ContinuousClock.now + .seconds(30)
                if let nginx {
                    while nginx.loggedRequestCount() - before < result.webhooks, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    let received = nginx.processedRequests().dropFirst(before)
                    result.pushesArrived = received.count
                    result.duplicates = received.count - Set(received).count
                } else {
                    try await Task.sleep(for: .milliseconds(500))
                    let latencies = arrivals.latencies.sorted()
                    result.pushesArrived = latencies.count
                    result.pushP50Ms = percentileMs(latencies, 0.50)
                    result.pushP99Ms = percentileMs(latencies, 0.99)
                    result.pushMaxMs = (latencies.last ?? .zero).timeInterval * 1000
                }
                if let workBefore, let work = ProcessWork.of(pid: server.pid)?.per(result.webhooks, since: workBefore) {
                    result.serverCPUMicrosecondsPerWebhook = work.cpuMicroseconds
                    result.serverWork = work
                }
                return result
            }
            result.serverPeakRSSMiB = ProcessMemory.peakResidentMiB(pid: server.pid)
            result.serverAllocator = ProcessMemory.allocator(pid: server.pid)
            await server.stop()
            try await simulator?.shutdown()
            try emit(result, summary: result.summary, json: json)
        }

        /// The account, its APNs and Twilio credentials and the callees' bindings; a warm-up.
        private func prepare(http: HTTPClient, server: BenchServer, signingKey: P256.Signing.PrivateKey) async throws -> WebhookSender {
            let api = Setup(http: http, base: server.base)
            let account = try await server.createAccount(http: http)
            let apns = try JSONSerialization.data(withJSONObject: [
                "teamId": "BENCH12345", "keyId": "BENCHKEY01", "privateKey": signingKey.pemRepresentation, "topic": "com.example.bench",
            ])
            _ = try await api.send(.PUT, "/v1/credentials/apns", account.apiKey, String(decoding: apns, as: UTF8.self))
            let sid = "AC" + String(repeating: "0", count: 32)
            let authToken = "bench-twilio-auth-token"
            _ = try await api.send(.PUT, "/v1/credentials/twilio", account.apiKey, #"{"accountSid":"\#(sid)","authToken":"\#(authToken)"}"#)
            for index in 0..<callees {
                let token = (0..<32).map { String(format: "%02x", ($0 &* 7 &+ index) & 0xFF) }.joined() + String(format: "%08x", index)
                _ = try await api.send(
                    .POST, "/v1/bindings", account.apiKey,
                    #"{"identity":"user-\#(index)","type":"apns_voip","token":"\#(token)","environment":"production"}"#)
            }
            // Warm up: connections and the provider token, outside the measurement.
            let webhook = WebhookSender(http: http, base: server.base, accountID: account.id, sid: sid, authToken: authToken)
            for index in 0..<min(50, callees) { _ = await webhook.send(messageID: "WBwarm\(index)", callee: "user-\(index)") }
            return webhook
        }

        /// --rate webhooks a second for --duration seconds from this process.
        private func measureOpenLoop(webhook: WebhookSender, arrivals: Arrivals) async throws -> WebhookBenchResult {
            let calleeCount = callees
            // Signed and serialized before the clock starts, as wrk's are, and sent as bytes: the
            // load runs on the same two cores as the server, and AsyncHTTPClient cost ~360 µs of
            // them a webhook.
            guard let url = URL(string: webhook.base), let host = url.host, let port = url.port else {
                throw ValidationError("Cannot read the server's address from \(webhook.base).")
            }
            let count = rate * duration
            let requests = (0..<count).map { index in
                let signed = webhook.signed(messageID: "WB\(index)", callee: "user-\(index % calleeCount)")
                return ByteBuffer(
                    string: "POST \(signed.path) HTTP/1.1\r\nHost: \(host):\(port)\r\nContent-Type: application/json\r\n"
                        + "X-Twilio-Signature: \(signed.signature)\r\nContent-Length: \(signed.body.utf8.count)\r\n\r\n\(signed.body)")
            }
            // Push arrivals are timed only at the simulator (nginx's log has no send times).
            let timesPushes = apns == .simulator
            let load = OpenLoopHTTP1Load(host: host, port: port, requests: requests, rate: rate) { index in
                if timesPushes { arrivals.sent("WB\(index)") }
            }
            let loadCPUBefore = ProcessMemory.cpuSeconds(pid: getpid()) ?? 0
            let (elapsed, responses) = try await load.run()
            let loadCPU = (ProcessMemory.cpuSeconds(pid: getpid()) ?? 0) - loadCPUBefore
            let sorted = responses.sorted
            return WebhookBenchResult(
                apns: apns.rawValue, load: "open loop at \(rate)/s", webhooks: count, failures: responses.failures.withLock { $0 },
                seconds: elapsed.timeInterval, webhooksPerSecond: Double(count) / elapsed.timeInterval,
                responseP50Ms: percentileMs(sorted, 0.50), responseP99Ms: percentileMs(sorted, 0.99),
                responseMaxMs: (sorted.last ?? .zero).timeInterval * 1000,
                responseP99By10sMs: responses.windowPercentilesMs(0.99, windowsOf: rate * 10),
                loadCPUMicrosecondsPerWebhook: loadCPU * 1e6 / Double(count))
        }

        /// --count pre-signed webhooks from wrk, closed loop over --connections; timed by the
        /// first and last push nginx logged.
        private func measureWithWrk(webhook: WebhookSender, directory: TemporaryDirectory, nginx: InteropServer) async throws -> WebhookBenchResult {
            let requests = directory.appending("webhooks.txt")
            var lines = ""
            lines.reserveCapacity(count * 520)
            for index in 0..<count {
                let signed = webhook.signed(messageID: "WB\(index)", callee: "user-\(index % callees)")
                lines += "\(signed.path) \(signed.signature) \(signed.body)\n"
            }
            try Data(lines.utf8).write(to: URL(fileURLWithPath: requests))
            let script = directory.appending("webhooks.lua")
            try Data(WrkScript.text.utf8).write(to: URL(fileURLWithPath: script))
            let before = nginx.loggedRequestCount()
            let wrk = try WrkScript.start(
                base: webhook.base, script: script, arguments: [requests, String(wrkThreads)], threads: wrkThreads, connections: connections)
            let deadline = ContinuousClock.now + .seconds(600)
            while nginx.loggedRequestCount() - before < count, wrk.isRunning, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(200))  // the last answers reach wrk
            let report = try await wrk.finish()
            let arrivals = nginx.nginxLog().dropFirst(before).map(\.at)
            let seconds = max((arrivals.max() ?? 0) - (arrivals.min() ?? 0), 0.001)
            return WebhookBenchResult(
                apns: apns.rawValue, load: "wrk, \(connections) connections, \(wrkThreads) thread(s)", webhooks: count,
                failures: report.errors, seconds: seconds, webhooksPerSecond: Double(min(arrivals.count, count)) / seconds,
                responseP50Ms: report.p50Ms, responseP99Ms: report.p99Ms, responseMaxMs: report.maxMs)
        }

        /// The `twi_message_id` of a pushed body, found as bytes: the bench wrote the body, so it
        /// knows the spelling, and parsing every push would spend the load's own CPU.
        static func messageID(in payload: Data) -> String? {
            let bytes = [UInt8](payload)
            guard let start = bytes.firstRange(of: Self.messageIDMarker)?.upperBound,
                let end = bytes[start...].firstIndex(of: UInt8(ascii: "\""))
            else { return nil }
            return String(decoding: bytes[start..<end], as: UTF8.self)
        }

        private static let messageIDMarker = Array(#""twi_message_id":""#.utf8)
    }
}

/// Send and arrival times of webhooks, matched by `twi_message_id`.
final class Arrivals: Sendable {
    private let state = Mutex<(sent: [String: ContinuousClock.Instant], latencies: [Duration])>(([:], []))

    func sent(_ id: String) {
        state.withLock { $0.sent[id] = .now }
    }

    func arrived(_ id: String) {
        let now = ContinuousClock.Instant.now
        state.withLock { state in
            if let sent = state.sent.removeValue(forKey: id) { state.latencies.append(now - sent) }
        }
    }

    var latencies: [Duration] { state.withLock { $0.latencies } }
}

/// Signs and posts Twilio Call Notifications.
struct WebhookSender: Sendable {
    let http: HTTPClient
    let base: String
    let accountID: String
    let sid: String
    let authToken: String

    /// One notification as Twilio signs it: the path (with its `bodySHA256`), the signature and the JSON body.
    func signed(messageID: String, callee: String) -> (path: String, signature: String, body: String) {
        let body =
            #"{"twi_account_sid":"\#(sid)","twi_bridge_token":"eyJiZW5jaA","twi_call_sid":"CA\#(messageID)","twi_from":"client:bench","twi_message_id":"\#(messageID)","twi_message_type":"twilio.voice.call","twi_to":"client:\#(callee)"}"#
        let path = "/v1/webhooks/twilio/\(accountID)?bodySHA256=\(SHA256.hash(data: Data(body.utf8)).hexEncoded)"
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data((base + path).utf8), using: SymmetricKey(data: Data(authToken.utf8)))
        return (path, Data(mac).base64EncodedString(), body)
    }

    /// Posts one notification; returns the HTTP status (0 when the request failed).
    func send(messageID: String, callee: String) async -> Int {
        let signed = signed(messageID: messageID, callee: callee)
        var request = HTTPClientRequest(url: base + signed.path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "X-Twilio-Signature", value: signed.signature)
        request.body = .bytes(ByteBuffer(string: signed.body))
        do {
            let response = try await http.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            return Int(response.status.code)
        } catch {
            return 0
        }
    }
}

/// Set-up calls against the server under test.
struct Setup {
    let http: HTTPClient
    let base: String

    /// Sends a request and returns its answer's body; throws unless the status is 2xx.
    func send(_ method: HTTPMethod, _ path: String, _ token: String, _ body: String) async throws -> Data {
        let (status, data) = try await exchange(method, path, token, body)
        guard (200..<300).contains(status) else {
            throw ValidationError("Set-up \(method) \(path) failed: \(status) \(String(decoding: data, as: UTF8.self))")
        }
        return data
    }

    /// Sends a request and returns its answer, whatever the status; answers longer than `limit` bytes are an error.
    func exchange(
        _ method: HTTPMethod, _ path: String, _ token: String, _ body: String, limit: Int = 1 << 20
    ) async throws -> (status: Int, body: Data) {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await http.execute(request, timeout: .seconds(30))
        return (Int(response.status.code), Data(buffer: try await response.body.collect(upTo: limit)))
    }
}

/// What a webhook benchmark measured.
struct WebhookBenchResult: Codable {
    var apns: String
    var load: String
    var webhooks: Int
    /// Answers other than 200, and requests that got no answer.
    var failures: Int
    var seconds: Double
    var webhooksPerSecond: Double
    var responseP50Ms: Double
    var responseP99Ms: Double
    var responseMaxMs: Double
    /// Open loop: the response p99 of each 10 s of the run, in order (rings time out from the 45th second).
    var responseP99By10sMs: [Double]? = nil
    /// Open loop: this process's own CPU per webhook while sending, on the same cores as the server.
    var loadCPUMicrosecondsPerWebhook: Double? = nil
    var pushesArrived = 0
    /// Pushes the endpoint received more than once (nginx, by apns-id).
    var duplicates: Int?
    /// Webhook sent → push at the simulator.
    var pushP50Ms: Double?
    var pushP99Ms: Double?
    var pushMaxMs: Double?
    var serverCPUMicrosecondsPerWebhook: Double?
    /// The server's system calls, bytes written and context switches per webhook: steadier run to run than its CPU.
    var serverWork: WorkPerUnit?
    var serverPeakRSSMiB: Double?
    var serverAllocator: String?

    var summary: String {
        var lines = [
            "webhooks     \(webhooks) signed Twilio notifications, \(load), APNs endpoint \(apns) (\(failures) not answered 200)",
            "throughput   \(String(format: "%.0f", webhooksPerSecond)) webhooks/s over \(String(format: "%.1f", seconds)) s; \(pushesArrived) pushes arrived"
                + (duplicates.map { ", \($0) received twice" } ?? ""),
        ]
        if let pushP50Ms, let pushP99Ms, let pushMaxMs {
            lines.append(
                "to push      p50 \(String(format: "%.2f", pushP50Ms)) ms, p99 \(String(format: "%.2f", pushP99Ms)) ms, max \(String(format: "%.2f", pushMaxMs)) ms (webhook sent → push at the simulator)")
        }
        lines.append(
            "response     p50 \(String(format: "%.2f", responseP50Ms)) ms, p99 \(String(format: "%.2f", responseP99Ms)) ms, max \(String(format: "%.2f", responseMaxMs)) ms (after the push's answer)")
        if let windows = responseP99By10sMs, windows.count > 1 {
            lines.append("p99 by 10 s  \(windows.map { String(format: "%.1f", $0) }.joined(separator: ", ")) ms")
        }
        lines.append("server CPU   \(serverCPUMicrosecondsPerWebhook.map { String(format: "%.0f µs a webhook", $0) } ?? "unknown")")
        if let work = serverWork?.text(per: "webhook") { lines.append("server work  \(work)") }
        if let loadCPUMicrosecondsPerWebhook {
            lines.append("load CPU     \(String(format: "%.0f µs a webhook", loadCPUMicrosecondsPerWebhook)) (this process, sending)")
        }
        lines.append(
            "server RSS   \(serverPeakRSSMiB.map { String(format: "%.0f MiB peak", $0) } ?? "unknown"); allocator \(serverAllocator ?? "unknown")")
        return lines.joined(separator: "\n")
    }
}
