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
import Synchronization

extension BenchCommand {
    /// `ringrelay bench webhooks`: signed Twilio webhooks into a real server process, timed to the
    /// push's arrival at the APNs simulator.
    struct Webhooks: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "webhooks",
            abstract: "Signed Twilio webhooks at a fixed rate into a `ringrelay serve` child process, timed to push arrival.",
            discussion: """
                Starts the APNs simulator in this process and `ringrelay serve` (this same executable) as a child on \
                an empty data directory, sets up an account with APNs and Twilio credentials and --callees identities \
                with one VoIP binding each, then sends webhooks at --rate for --duration seconds (open loop). Reports \
                webhooks/s, webhook-to-push-arrival and webhook response percentiles, and the server's peak RSS. Build \
                with -c release for meaningful figures.
                """)

        @Option(help: "Webhooks per second.") var rate = 1000
        @Option(help: "Seconds of load.") var duration = 60
        @Option(help: "Distinct callees (one VoIP binding each).") var callees = 100
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard rate > 0, duration > 0, callees > 0 else { throw ValidationError("--rate, --duration and --callees must be positive.") }
        }

        func run() async throws {
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench-webhooks")
            defer { directory.remove() }
            let arrivals = Arrivals()
            var simulatorConfiguration = APNsSimulator.Configuration()
            // Arrivals are timed by the callback; keeping pushes would only cost the load's own CPU.
            simulatorConfiguration.maximumRecordedPushes = 0
            simulatorConfiguration.onPush = { push in
                if let id = Self.messageID(in: push.payload) { arrivals.arrived(id) }
            }
            let simulator = try APNsSimulator(configuration: simulatorConfiguration)
            try await simulator.start()
            let caFile = directory.appending("apns.pem")
            try simulator.writeCertificate(toFile: caFile)
            let signingKey = P256.Signing.PrivateKey()
            simulator.registerSigningKey(teamID: "BENCH12345", keyID: "BENCHKEY01", publicKey: signingKey.publicKey, topics: ["com.example.bench"])

            let server = try BenchServer(
                dataDirectory: directory.appending("data"),
                arguments: ["--apns-endpoint-production", simulator.url, "--apns-endpoint-sandbox", simulator.url, "--push-ca-file", caFile])
            defer { server.terminate() }

            let result = try await server.withHTTPClient { http in
                try await measure(http: http, server: server, simulator: simulator, signingKey: signingKey, arrivals: arrivals)
            }
            try emit(result, summary: result.summary, json: json)
        }

        private func measure(
            http: HTTPClient, server: BenchServer, simulator: APNsSimulator, signingKey: P256.Signing.PrivateKey, arrivals: Arrivals
        ) async throws -> WebhookBenchResult {
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
                _ = try await api.send(.POST, "/v1/bindings", account.apiKey, #"{"identity":"user-\#(index)","type":"apns_voip","token":"\#(token)"}"#)
            }

            // Warm up: connections and the provider token, outside the measurement.
            let webhook = WebhookSender(http: http, base: server.base, accountID: account.id, sid: sid, authToken: authToken)
            for index in 0..<min(50, callees) { _ = await webhook.send(messageID: "WBwarm\(index)", callee: "user-\(index)") }

            let calleeCount = callees
            let load = LoadGenerator(count: rate * duration, concurrency: .max, rate: rate)
            let (elapsed, responses) = try await load.run { index in
                let messageID = "WB\(index)"
                arrivals.sent(messageID)
                return await webhook.send(messageID: messageID, callee: "user-\(index % calleeCount)") == 200
            }
            let total = load.count
            try await Task.sleep(for: .milliseconds(500))  // the last pushes' arrivals
            let peakRSS = ProcessMemory.peakResidentMiB(pid: server.pid)
            await server.stop()
            try await simulator.shutdown()

            let pushLatencies = arrivals.latencies.sorted()
            let responseLatencies = responses.sorted
            return WebhookBenchResult(
                webhooks: total, failures: responses.failures.withLock { $0 }, pushesArrived: pushLatencies.count, seconds: elapsed.timeInterval,
                webhooksPerSecond: Double(total) / elapsed.timeInterval, targetRate: rate,
                pushP50Ms: percentileMs(pushLatencies, 0.50), pushP99Ms: percentileMs(pushLatencies, 0.99),
                pushMaxMs: (pushLatencies.last ?? .zero).timeInterval * 1000,
                responseP50Ms: percentileMs(responseLatencies, 0.50), responseP99Ms: percentileMs(responseLatencies, 0.99),
                serverPeakRSSMiB: peakRSS)
        }

        /// `twi_message_id` of a pushed payload.
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

    /// Posts one notification; returns the HTTP status (0 when the request failed).
    func send(messageID: String, callee: String) async -> Int {
        let body = Array(
            #"{"twi_account_sid":"\#(sid)","twi_bridge_token":"eyJiZW5jaA","twi_call_sid":"CA\#(messageID)","twi_from":"client:bench","twi_message_id":"\#(messageID)","twi_message_type":"twilio.voice.call","twi_to":"client:\#(callee)"}"#.utf8)
        let hash = SHA256.hash(data: body).hexEncoded
        let url = "\(base)/v1/webhooks/twilio/\(accountID)?bodySHA256=\(hash)"
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(url.utf8), using: SymmetricKey(data: Data(authToken.utf8)))
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "X-Twilio-Signature", value: Data(mac).base64EncodedString())
        request.body = .bytes(ByteBuffer(bytes: body))
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
    var webhooks: Int
    var failures: Int
    var pushesArrived: Int
    var seconds: Double
    var webhooksPerSecond: Double
    var targetRate: Int
    var pushP50Ms: Double
    var pushP99Ms: Double
    var pushMaxMs: Double
    var responseP50Ms: Double
    var responseP99Ms: Double
    var serverPeakRSSMiB: Double?

    var summary: String {
        """
        webhooks     \(webhooks) signed Twilio notifications at \(targetRate)/s (\(failures) not answered 200)
        throughput   \(String(format: "%.0f", webhooksPerSecond)) webhooks/s over \(String(format: "%.1f", seconds)) s; \(pushesArrived) pushes arrived
        to push      p50 \(String(format: "%.2f", pushP50Ms)) ms, p99 \(String(format: "%.2f", pushP99Ms)) ms, max \(String(format: "%.2f", pushMaxMs)) ms (webhook sent → push at the simulator)
        response     p50 \(String(format: "%.2f", responseP50Ms)) ms, p99 \(String(format: "%.2f", responseP99Ms)) ms
        server RSS   \(serverPeakRSSMiB.map { String(format: "%.0f MiB peak", $0) } ?? "unknown")
        """
    }
}
