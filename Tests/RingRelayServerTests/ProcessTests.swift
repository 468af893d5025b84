import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationEssentialsCompat
import NIOHTTP1
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

/// The real executable: start-up, configuration, signals, and the CLI verbs.
@Suite(.serialized) struct ProcessTests {
    let adminToken = "process-test-admin-token-0123456789"

    static func request(
        _ method: HTTPMethod, _ url: String, token: String, body: String? = nil, client: HTTPClient = .shared
    ) async throws -> (Int, Data) {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await client.execute(request, timeout: .seconds(30))
        return (Int(response.status.code), Data(buffer: try await response.body.collect(upTo: 1 << 20)))
    }

    /// The admin token and the `default` account's key a first start printed.
    private static func printedSecrets(_ server: ServerProcess) throws -> (admin: String, key: String) {
        let printed = server.stdout
        return (
            try #require(printed.firstMatch(of: /RINGRELAY_ADMIN_TOKEN=(\S+)/)?.1).description,
            try #require(printed.firstMatch(of: /RINGRELAY_TOKEN=(\S+)/)?.1).description
        )
    }

    @Test func firstStartPrintsSecretsOnceAndKeepsThem() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let first = try ServerProcess(["serve", "--port", "0", "--data-dir", "data"], directory: directory.path)
        let url = try await first.waitUntilListening()
        let (admin, key) = try Self.printedSecrets(first)
        let stored = try String(contentsOfFile: directory.appending("data/admin-token"), encoding: .utf8)
        #expect(stored.trimmingCharacters(in: .whitespacesAndNewlines) == admin)
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appending("data/admin-token"))
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try await Self.request(.GET, url + "/v1/accounts", token: admin).0 == 200)
        #expect(try await Self.request(.GET, url + "/v1/bindings", token: key).0 == 200)
        // Secrets never reach the log.
        #expect(!first.stderr.contains(admin))
        #expect(!first.stderr.contains(key))
        first.signal(SIGINT)
        #expect(try await first.waitForExit() == 0)
        // A quick, clean stop says nothing alarming (a cancelled service once read as "grace passed").
        #expect(!first.stderr.contains("warning"), "\(first.stderr)")

        let second = try ServerProcess(["serve", "--port", "0", "--data-dir", "data"], directory: directory.path)
        let secondURL = try await second.waitUntilListening()
        #expect(!second.stdout.contains("RINGRELAY_ADMIN_TOKEN="))
        #expect(!second.stdout.contains("RINGRELAY_TOKEN="))
        #expect(try await Self.request(.GET, secondURL + "/v1/bindings", token: key).0 == 200)
        #expect(try await Self.request(.GET, secondURL + "/v1/accounts", token: admin).0 == 200)
        second.signal(SIGTERM)
        #expect(try await second.waitForExit() == 0)
    }

    /// A port in use stops start-up before the one-time secrets exist (issue 19 item 1): the error
    /// names --port, nothing is printed or written, and the next start shows both secrets.
    @Test func busyPortSpendsNoSecrets() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let occupier = try ServerProcess(["serve", "--port", "0", "--data-dir", "other", "--admin-token", adminToken], directory: directory.path)
        let occupied = try #require(URLComponents(string: try await occupier.waitUntilListening())?.port)

        let said = "Cannot listen on 127.0.0.1:\(occupied) because the port is already in use; stop what uses it, "
            + "or pass --port (RINGRELAY_PORT) with a free port, or 0 to pick one."
        let refused = try await ServerProcess.run(["serve", "--port", "\(occupied)", "--data-dir", "data"], directory: directory.path)
        #expect(refused.status == 1)
        // After the store's own lines (its migrations, at info), that one sentence and nothing else.
        #expect(refused.stderr.split(separator: "\n").filter { !$0.contains(" info ringrelay: ") } == [Substring(said)], "\(refused.stderr)")
        #expect(!refused.stdout.contains("RINGRELAY_ADMIN_TOKEN="), "\(refused.stdout)")
        #expect(!refused.stdout.contains("RINGRELAY_TOKEN="), "\(refused.stdout)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("data/admin-token")))

        // With --log-format json it is a log line like the others, for a collector.
        let json = try await ServerProcess.run(
            ["serve", "--port", "\(occupied)", "--data-dir", "data", "--log-format", "json"], directory: directory.path)
        #expect(json.status == 1)
        let failure = try #require(try Self.jsonLines(json.stderr).last, "\(json.stderr)")
        #expect(failure["level"] as? String == "critical")
        #expect(failure["message"] as? String == said)
        #expect((failure["metadata"] as? [String: String])?["error.code"] == "listen_failed")
        occupier.signal(SIGTERM)
        #expect(try await occupier.waitForExit() == 0)

        let started = try ServerProcess(["serve", "--port", "0", "--data-dir", "data"], directory: directory.path)
        let url = try await started.waitUntilListening()
        let (admin, key) = try Self.printedSecrets(started)
        #expect(try await Self.request(.GET, url + "/v1/accounts", token: admin).0 == 200)
        #expect(try await Self.request(.GET, url + "/v1/bindings", token: key).0 == 200)
        started.signal(SIGTERM)
        #expect(try await started.waitForExit() == 0)
    }

    /// `--log-format json --access-log` (issue 19 item 13): every line on stderr is one JSON object
    /// with the same keys; each request, the WebSocket upgrade and a webhook included, gets an
    /// access line whose request id is the one its answer carried; no token reaches the log.
    @Test func jsonAccessLogEchoesEachAnswersRequestID() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken, "--log-format", "json", "--access-log"], directory: directory.path)
        let url = try await server.waitUntilListening()
        let port = try #require(URLComponents(string: url)?.port)
        func send(_ method: HTTPMethod, _ path: String, token: String? = nil, body: String? = nil) async throws -> (status: Int, id: String, body: Data) {
            var request = HTTPClientRequest(url: url + path)
            request.method = method
            if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(string: body))
            }
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
            let data = Data(buffer: try await response.body.collect(upTo: 1 << 20))
            return (Int(response.status.code), try #require(response.headers.first(name: "X-Request-Id")), data)
        }
        let created = try await send(.POST, "/v1/accounts", token: adminToken, body: #"{"name":"logs"}"#)
        let account = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: created.body)
        let minted = try await send(.POST, "/v1/access-tokens", token: account.apiKey, body: #"{"identity":"alice","deviceId":"phone"}"#)
        let device = try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: minted.body).token
        let webhook = try await send(.POST, "/v1/webhooks/twilio/\(account.id)", body: WebhookTests.twilioBody())
        let socket = try RawWebSocket(port: port, path: "/v1/connect?access_token=\(device)", receiveBuffer: 1 << 16)
        let handshake = socket.handshake
        socket.close()
        #expect(handshake.hasPrefix("HTTP/1.1 101"), "\(handshake)")
        let upgrade = try #require(handshake.firstMatch(of: /(?i)x-request-id: (\S+)/)?.1).description

        let expected = [
            created.id: ("POST", "/v1/accounts", "201"), minted.id: ("POST", "/v1/access-tokens", "201"),
            webhook.id: ("POST", "/v1/webhooks/twilio/{accountId}", "\(webhook.status)"), upgrade: ("GET", "/v1/connect", "200"),
        ]
        var access: [String: [String: String]] = [:]
        let deadline = ContinuousClock.now + .seconds(30)
        while access.count < expected.count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            access = [:]
            for line in server.stderr.split(separator: "\n") {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
                #expect(Set(object.keys) == ["time", "level", "label", "message", "metadata", "source"], "\(line)")
                guard object["message"] as? String == "request", let metadata = object["metadata"] as? [String: String],
                    let id = metadata["request.id"], expected[id] != nil
                else { continue }
                access[id] = metadata
            }
        }
        for (id, (method, route, status)) in expected {
            let line = try #require(access[id], "no access line for \(route) (\(id)): \(server.stderr.suffix(2000))")
            #expect(line["http.method"] == method && line["http.route"] == route && line["http.status"] == status, "\(line)")
        }
        #expect(webhook.status == 403)
        for token in [adminToken, account.apiKey, device] { #expect(!server.stderr.contains(token)) }
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)

        let badFormat = try await ServerProcess.run(["serve", "--log-format", "xml"], directory: directory.path)
        #expect(badFormat.status == 78)
        #expect(badFormat.stderr.contains("--log-format / RINGRELAY_LOG_FORMAT"))
    }

    @Test func badConfigurationStopsStartUpNamingTheKey() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let badFlag = try await ServerProcess.run(["serve", "--port", "eighty"], directory: directory.path)
        #expect(badFlag.status == 78)
        #expect(badFlag.stderr.contains("--port / RINGRELAY_PORT"))

        let badEnvironment = try await ServerProcess.run(["serve"], directory: directory.path, environment: ["RINGRELAY_LOG_LEVEL": "loud"])
        #expect(badEnvironment.status == 78)
        #expect(badEnvironment.stderr.contains("RINGRELAY_LOG_LEVEL"))

        // .env is read, and the environment beats it.
        try "RINGRELAY_PORT=99999\n".write(toFile: directory.appending(".env"), atomically: true, encoding: .utf8)
        let badDotEnv = try await ServerProcess.run(["serve"], directory: directory.path)
        #expect(badDotEnv.status == 78)
        #expect(badDotEnv.stderr.contains("99999"))
        let environmentWins = try ServerProcess(["serve", "--data-dir", "data"], directory: directory.path, environment: ["RINGRELAY_PORT": "0"])
        _ = try await environmentWins.waitUntilListening()
        environmentWins.signal(SIGTERM)
        #expect(try await environmentWins.waitForExit() == 0)

        let help = try await ServerProcess.run(["serve", "--help"], directory: directory.path)
        #expect(help.status == 0)
        #expect(help.stdout.contains("RINGRELAY_DATA_DIR"))
    }

    /// Quotes, `export` and comments in `.env` mean what dotenv tools make of them; a line it
    /// cannot read stops start-up naming the line, never the value.
    @Test func dotEnvIsReadAsDotenvToolsReadIt() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let dotEnv = """
            export RINGRELAY_PORT="0"   # any free port
            RINGRELAY_DATA_DIR='data'
            RINGRELAY_ADMIN_TOKEN=\(adminToken) # from the team vault

            """
        try dotEnv.write(toFile: directory.appending(".env"), atomically: true, encoding: .utf8)
        let server = try ServerProcess(["serve"], directory: directory.path)
        let url = try await server.waitUntilListening()
        #expect(try await Self.request(.GET, url + "/v1/accounts", token: adminToken).0 == 200)
        #expect(FileManager.default.fileExists(atPath: directory.appending("data/ringrelay.sqlite")))
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)

        try (dotEnv + "RINGRELAY_METRICS_TOKEN=\"unclosed-secret-value\n").write(
            toFile: directory.appending(".env"), atomically: true, encoding: .utf8)
        let refused = try await ServerProcess.run(["serve"], directory: directory.path)
        #expect(refused.status == 78)
        #expect(refused.stderr.contains(".env line 4: the double quote is not closed"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("unclosed-secret-value"))
    }

    /// A configuration that stops `serve` is said in the log format asked for, by flag or by the
    /// environment: one JSON line for a collector, the setting named, never its value's secret.
    @Test func aBadConfigurationIsAJSONLineWithLogFormatJSON() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let port = try await ServerProcess.run(["serve", "--port", "99999"], directory: directory.path, environment: ["RINGRELAY_LOG_FORMAT": "json"])
        #expect(port.status == 78)
        let lines = try Self.jsonLines(port.stderr)
        #expect(lines.count == 1, "\(port.stderr)")
        #expect(lines.first?["message"] as? String == "Invalid configuration --port / RINGRELAY_PORT: must be a whole number from 0 to 65535, got '99999'.")
        #expect(lines.first?["level"] as? String == "critical")

        // A .env that cannot be read: the flag still says JSON.
        try "RINGRELAY_METRICS_TOKEN=\"unclosed-secret-value\n".write(toFile: directory.appending(".env"), atomically: true, encoding: .utf8)
        let dotEnv = try await ServerProcess.run(["serve", "--log-format", "json"], directory: directory.path)
        #expect(dotEnv.status == 78)
        let message = try #require(try Self.jsonLines(dotEnv.stderr).first?["message"] as? String, "\(dotEnv.stderr)")
        #expect(message.contains(".env line 1: the double quote is not closed"), "\(message)")
        #expect(!dotEnv.stderr.contains("unclosed-secret-value"))
    }

    /// Each line of `text` as a JSON object with the log's six keys; any other line fails the test.
    static func jsonLines(_ text: String) throws -> [[String: Any]] {
        try text.split(separator: "\n").map { line in
            let object = try #require(try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON line: \(line)")
            #expect(Set(object.keys) == ["time", "level", "label", "message", "metadata", "source"], "\(line)")
            return object
        }
    }

    /// Requests in flight when SIGTERM arrives either finish or fail; every one that was
    /// acknowledged is still there after a restart.
    @Test func sigtermDuringRequestsLosesNothingAcknowledged() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let arguments = ["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken, "--log-level", "warning"]
        let server = try ServerProcess(arguments, directory: directory.path)
        let url = try await server.waitUntilListening()
        let (_, accountData) = try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"load"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey

        let acknowledged = ServerProcess.Collected()  // binding ids, one per line
        // Once the server has gone, a request fails at once instead of retrying the connection
        // until its 30 s timeout (AsyncHTTPClient's default), which is all this test would wait for.
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        let load: Result<Void, any Error>
        do {
            try await Self.loadUntilSIGTERM(server: server, url: url, key: key, client: client, acknowledged: acknowledged)
            load = .success(())
        } catch {
            load = .failure(error)
        }
        try await client.shutdown()
        try load.get()
        #expect(try await server.waitForExit() == 0)
        let ids = acknowledged.text.withLock { $0 }.split(separator: "\n").map(String.init)
        #expect(ids.count >= 100)
        #expect(ids.count < 3200, "the server should have stopped before every request was made")

        let restarted = try ServerProcess(arguments, directory: directory.path)
        let newURL = try await restarted.waitUntilListening()
        var stored = Set<String>()
        var cursor: String?
        repeat {
            let (_, data) = try await Self.request(.GET, newURL + "/v1/bindings?limit=500" + (cursor.map { "&cursor=\($0)" } ?? ""), token: key)
            let page = try JSONDecoder.ringRelay.decode(BindingList.self, from: data)
            stored.formUnion(page.data.map(\.id))
            cursor = page.nextCursor
        } while cursor != nil
        #expect(Set(ids).isSubset(of: stored), "lost \(Set(ids).subtracting(stored).count) acknowledged bindings")
        restarted.signal(SIGTERM)
        #expect(try await restarted.waitForExit() == 0)
    }

    /// `kill -9` with calls in flight: every call answered `201` is there after the restart, with
    /// every delivery the answer reported (the records are committed before the answer goes out),
    /// and every cancel answered `200` left its call cancelled.
    /// Accounts, keys and bindings are committed before theirs too, so they are checked alongside.
    @Test func sigkillLosesNoAcknowledgedCallOrDelivery() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let arguments = [
            "serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken, "--log-level", "warning", "--rate-limit", "0",
        ]
        let server = try ServerProcess(arguments, directory: directory.path)
        let url = try await server.waitUntilListening()
        let (_, accountData) = try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"crash"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        // Three devices, no FCM credential: each ring plans three deliveries that end at once.
        for device in 1...3 {
            let body = #"{"identity":"bob","type":"fcm","token":"bob-token-\#(device)","deviceId":"b\#(device)"}"#
            #expect(try await Self.request(.POST, url + "/v1/bindings", token: key, body: body).0 == 201)
        }

        final class Acknowledged: Sendable {
            let calls = Mutex<[CallResource]>([])
            /// Calls whose cancel was answered 200.
            let cancelled = Mutex<[String]>([])
        }
        let acknowledged = Acknowledged()
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<500 {
                        guard let (status, data) = try? await Self.request(.POST, url + "/v1/calls", token: key, body: #"{"from":"alice","to":"bob"}"#, client: client),
                            status == 201, let call = try? JSONDecoder.ringRelay.decode(CallResource.self, from: data)
                        else { return }
                        acknowledged.calls.withLock { $0.append(call) }
                        // Every other call's state change is acknowledged too.
                        guard acknowledged.calls.withLock({ $0.count }) % 2 == 0,
                            let (cancelStatus, _) = try? await Self.request(.POST, url + "/v1/calls/\(call.id)/cancel", token: key, client: client)
                        else { continue }
                        if cancelStatus == 200 { acknowledged.cancelled.withLock { $0.append(call.id) } }
                    }
                }
            }
            group.addTask {
                let deadline = ContinuousClock.now + .seconds(60)
                while acknowledged.calls.withLock({ $0.count }) < 40, ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(1))
                }
                server.signal(SIGKILL)
            }
        }
        try await client.shutdown()
        #expect(try await server.waitForExit() == SIGKILL)
        let calls = acknowledged.calls.withLock { $0 }
        let cancelled = Set(acknowledged.cancelled.withLock { $0 })
        #expect(calls.count >= 40)
        #expect(cancelled.count >= 10)

        let restarted = try ServerProcess(arguments, directory: directory.path)
        let newURL = try await restarted.waitUntilListening()
        var lost: [String] = []
        for call in calls {
            #expect(call.deliveries?.count == 3)
            let (status, data) = try await Self.request(.GET, newURL + "/v1/calls/\(call.id)", token: key)
            guard status == 200, let stored = try? JSONDecoder.ringRelay.decode(CallResource.self, from: data) else {
                lost.append("\(call.id): \(status)")
                continue
            }
            if cancelled.contains(call.id), stored.state != "cancelled" { lost.append("\(call.id): cancel acknowledged, stored \(stored.state)") }
            let storedDeliveries = Dictionary(uniqueKeysWithValues: (stored.deliveries ?? []).map { ($0.id, $0) })
            for delivery in call.deliveries ?? [] {
                guard let kept = storedDeliveries[delivery.id] else {
                    lost.append("\(call.id)/\(delivery.id) missing")
                    continue
                }
                // What the answer reported as finished is finished on disk too.
                if delivery.outcome != "pending", kept.outcome != delivery.outcome {
                    lost.append("\(call.id)/\(delivery.id) \(delivery.outcome) → \(kept.outcome)")
                }
            }
        }
        #expect(lost.isEmpty, "\(lost.count) of \(calls.count) acknowledged calls lost something: \(lost.prefix(5))")
        restarted.signal(SIGTERM)
        #expect(try await restarted.waitForExit() == 0)
    }

    /// Live connections that come and go leave nothing behind: every connection that sent data
    /// cost its channel and read buffers for good when hummingbird-websocket's handler box and the
    /// request context held each other (about 33 MB per 500 connections here; now under 10 MB of
    /// allocator noise).
    @Test func liveConnectionsThatComeAndGoLeaveNothingBehind() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken, "--log-level", "error"], directory: directory.path)
        let url = try await server.waitUntilListening()
        let port = try #require(URL(string: url)?.port)
        let (_, accountData) = try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"churn"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        let (_, tokenData) = try await Self.request(.POST, url + "/v1/access-tokens", token: key, body: #"{"identity":"bob","deviceId":"b1"}"#)
        let token = try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: tokenData).token
        let frame = Array(#"{"type":"ping","\#(String(repeating: "x", count: 15_000))":1}"#.utf8)

        /// One device connecting again and again (each connection replaces the last), sending 15 KB frames.
        func churn(_ connections: Int) throws {
            for _ in 0..<connections {
                let device = try RawWebSocket(port: port, path: "/v1/connect?access_token=\(token)", receiveBuffer: 1 << 16)
                guard device.handshake.hasPrefix("HTTP/1.1 101") else { throw RawSocket.Failure(step: device.handshake) }
                _ = device.sendTextFrames(frame, count: 8, giveUpAfter: .seconds(5))
                _ = device.read(for: .milliseconds(200)) { $0.count > 8 * 40 }
                device.close()
            }
        }
        try churn(200)  // warm up: pools, caches and the allocator's arenas reach their working size
        try await Task.sleep(for: .seconds(1))
        let before = server.residentBytes
        try churn(500)
        try await Task.sleep(for: .seconds(1))
        let grown = server.residentBytes - before
        #expect(grown < 10 << 20, "resident memory grew by \(grown >> 20) MiB over 500 connections")
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
    }

    /// Eight clients adding bindings as fast as they can; SIGTERM once 100 are acknowledged.
    private static func loadUntilSIGTERM(
        server: ServerProcess, url: String, key: String, client: HTTPClient, acknowledged: ServerProcess.Collected
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in 0..<400 {
                        let body = #"{"identity":"user-\#(worker)","type":"fcm","token":"token-\#(worker)-\#(index)"}"#
                        guard let (status, data) = try? await Self.request(.POST, url + "/v1/bindings", token: key, body: body, client: client),
                            status == 201, let binding = try? JSONDecoder.ringRelay.decode(BindingResource.self, from: data)
                        else { return }
                        acknowledged.text.withLock { $0 += binding.id + "\n" }
                    }
                }
            }
            group.addTask {
                // 100 ids of 31 bytes, or 60 s if the requests fail (the count check says so).
                let deadline = ContinuousClock.now + .seconds(60)
                while acknowledged.text.withLock({ $0.count }) < 100 * 31, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(5))
                }
                server.signal(SIGTERM)
            }
            try await group.waitForAll()
        }
    }

    /// A WebSocket client that ignores the close frame and keeps sending cannot hold a shutdown
    /// open: it gets 1001 (going away) at once, and after --shutdown-grace the process exits anyway.
    @Test func aDeviceIgnoringTheCloseCannotHoldTheShutdownOpen() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken, "--shutdown-grace", "2s"], directory: directory.path)
        let url = try await server.waitUntilListening()
        let (_, accountData) = try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"grace"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        let (_, tokenData) = try await Self.request(.POST, url + "/v1/access-tokens", token: key, body: #"{"identity":"bob","deviceId":"b1"}"#)
        let token = try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: tokenData).token
        let port = try #require(URL(string: url)?.port)
        let device = try RawWebSocket(port: port, path: "/v1/connect?access_token=\(token)", receiveBuffer: 1 << 16)
        defer { device.close() }
        #expect(device.handshake.hasPrefix("HTTP/1.1 101"))
        let ready = Array(#""type":"ready""#.utf8)
        #expect(device.read(for: .seconds(10)) { $0.firstRange(of: ready) != nil }.firstRange(of: ready) != nil, "no ready frame")

        let stopped = ContinuousClock.now
        server.signal(SIGTERM)
        // The device keeps talking and never answers the close.
        let ping = Array(#"{"type":"ping"}"#.utf8)
        while server.process.isRunning, ContinuousClock.now - stopped < .seconds(30) {
            _ = device.sendTextFrames(ping, count: 1, giveUpAfter: .milliseconds(100))
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await server.waitForExit(timeout: .seconds(30)) == 0)
        let took = ContinuousClock.now - stopped
        #expect(took < .seconds(12), "the shutdown took \(took) with a 2 s grace")
        // A server close frame (0x88) with 1001 (0x03E9) came before the end.
        let received = device.read(for: .seconds(2)) { _ in false }
        let closeFrame = received.indices.dropLast(3).first { received[$0] == 0x88 && received[$0 + 2] == 0x03 && received[$0 + 3] == 0xE9 }
        #expect(closeFrame != nil, "no close frame with 1001 among \(received.count) bytes: \(received.suffix(40).map { String($0, radix: 16) })")
    }

    /// Silent sockets, half-sent headers, a stalled body, a body that trickles in a byte at a time
    /// and an idle keep-alive connection are all closed by their timeouts; connections past the
    /// per-address cap, or past the global cap behind a proxy, are refused at once.
    @Test func timeoutsAndConnectionCapsCloseWhatHangsAround() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken, "--header-timeout", "1s", "--idle-timeout", "2s", "--body-timeout", "1s"],
            directory: directory.path)
        let port = try #require(URL(string: try await server.waitUntilListening())?.port)
        let started = ContinuousClock.now
        let answers = try await withThrowingTaskGroup(of: (String, RawSocket.Answer).self) { group in
            for index in 0..<20 {
                group.addTask { ("silent \(index)", try await RawSocket.exchange(port: port, [[]], timeout: .seconds(10))) }
                group.addTask {
                    ("half headers \(index)", try await RawSocket.exchange(port: port, [Array("GET /healthz HTTP/1.1\r\nHos".utf8)], timeout: .seconds(10)))
                }
            }
            let head = "POST /v1/accounts HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer \(adminToken)\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            group.addTask {
                ("half a body", try await RawSocket.exchange(port: port, [Array(head.utf8) + Array(#"{"name":"#.utf8)], timeout: .seconds(10)))
            }
            // A byte every 200 ms restarts the idle timeout every time: the body would take 200 s.
            group.addTask {
                let poured = try await RawSocket.pour(port: port, head: Array(head.utf8), piece: [0x20], every: .milliseconds(200), count: 1000, within: .seconds(10))
                return ("trickled body", poured.answer)
            }
            group.addTask {
                ("idle keep-alive", try await RawSocket.exchange(port: port, [Array("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n".utf8)], timeout: .seconds(10)))
            }
            var answers: [(String, RawSocket.Answer)] = []
            for try await answer in group { answers.append(answer) }
            return answers
        }
        let took = ContinuousClock.now - started
        for (name, answer) in answers { #expect(answer.closed, "\(name) was still open") }
        #expect(answers.first { $0.0 == "idle keep-alive" }?.1.text.hasPrefix("HTTP/1.1 200") == true)
        for name in ["half a body", "trickled body"] {
            let text = answers.first { $0.0 == name }?.1.text ?? ""
            #expect(text.hasPrefix("HTTP/1.1 408 ") && text.contains(#""code":"request_timeout""#), "\(name): \(text)")
        }
        #expect(took < .seconds(8), "closing took \(took) with 1 s and 2 s timeouts")
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)

        // The per-address cap; and the global one, which holds behind a proxy too (where every
        // connection comes from the proxy, so the per-address cap is off).
        for cap in [["--max-connections-per-address", "5"], ["--max-connections", "5", "--trust-proxy"]] {
            let capped = try ServerProcess(["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken] + cap, directory: directory.path)
            let cappedPort = try #require(URL(string: try await capped.waitUntilListening())?.port)
            let holders = try (0..<5).map { _ in try RawWebSocket(port: cappedPort, path: nil, receiveBuffer: 1 << 16) }
            try await Task.sleep(for: .milliseconds(300))
            let refused = try await RawSocket.exchange(port: cappedPort, [Array("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n".utf8)], timeout: .seconds(5))
            #expect(refused.closed && refused.data.isEmpty, "\(cap): a sixth connection was served: \(refused.text.prefix(40))")
            holders[0].close()
            try await Task.sleep(for: .milliseconds(300))
            let admitted = try await RawSocket.exchange(
                port: cappedPort, [Array("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8)], timeout: .seconds(5))
            #expect(admitted.text.hasPrefix("HTTP/1.1 200"), "\(cap): \(admitted.text.prefix(40))")
            for holder in holders.dropFirst() { holder.close() }
            capped.signal(SIGTERM)
            #expect(try await capped.waitForExit() == 0)
        }
    }

    /// The database and its WAL are the server's alone (0600), and a data directory others can
    /// read is reported (issue 16 item 12).
    @Test func dataFilesAreNotReadableByOthers() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.appending("data"), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let server = try ServerProcess(["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken], directory: directory.path)
        let url = try await server.waitUntilListening()
        #expect(try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"modes"}"#).0 == 201)
        for file in ["ringrelay.sqlite", "ringrelay.sqlite-wal", "ringrelay.sqlite-shm"] {
            let mode = try FileManager.default.attributesOfItem(atPath: directory.appending("data/\(file)"))[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file) is \(String(mode ?? 0, radix: 8))")
        }
        #expect(server.stderr.contains("the data directory can be read by other users"))
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
    }

    /// `ringrelay backup` copies a running server's database; the copy serves the same data.
    @Test func backupCopiesARunningServer() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken], directory: directory.path)
        let url = try await server.waitUntilListening()
        let (_, created) = try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"kept"}"#)
        let account = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: created)
        let backup = try await ServerProcess.run(["backup", "copy.sqlite", "--data-dir", "data"], directory: directory.path)
        #expect(backup.status == 0, "\(backup.stderr)")
        let again = try await ServerProcess.run(["backup", "copy.sqlite", "--data-dir", "data"], directory: directory.path)
        #expect(again.status != 0, "a backup overwrote an existing file")
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)

        // Restored as a data directory of its own, the copy has the account.
        try FileManager.default.createDirectory(atPath: directory.appending("restored"), withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: directory.appending("copy.sqlite"), toPath: directory.appending("restored/ringrelay.sqlite"))
        let restored = try ServerProcess(["serve", "--port", "0", "--data-dir", "restored", "--admin-token", adminToken], directory: directory.path)
        let restoredURL = try await restored.waitUntilListening()
        #expect(try await Self.request(.GET, restoredURL + "/v1/bindings", token: account.apiKey).0 == 200)
        restored.signal(SIGTERM)
        #expect(try await restored.waitForExit() == 0)
    }

    @Test func adminVerbsTalkToARunningServer() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken], directory: directory.path)
        let url = try await server.waitUntilListening()
        let admin = ["RINGRELAY_URL": url, "RINGRELAY_ADMIN_TOKEN": adminToken]

        let created = try await ServerProcess.run(["accounts", "create", "--name", "cli", "--json"], directory: directory.path, environment: admin)
        #expect(created.status == 0, "\(created.stderr)")
        let account = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: Data(created.stdout.utf8))
        let listed = try await ServerProcess.run(["accounts", "list"], directory: directory.path, environment: admin)
        #expect(listed.stdout.contains(account.id))
        #expect(listed.stdout.contains("NAME"))

        let withKey = ["RINGRELAY_URL": url, "RINGRELAY_TOKEN": account.apiKey]
        let added = try await ServerProcess.run(
            ["bindings", "add", "--identity", "bob", "--type", "apns_voip", "--push-token", String(repeating: "ab", count: 32), "--environment", "sandbox", "--json"],
            directory: directory.path, environment: withKey)
        #expect(added.status == 0, "\(added.stderr)")
        let binding = try JSONDecoder.ringRelay.decode(BindingResource.self, from: Data(added.stdout.utf8))
        let bindings = try await ServerProcess.run(["bindings", "list", "--identity", "bob", "--json"], directory: directory.path, environment: withKey)
        #expect(try JSONDecoder.ringRelay.decode(BindingList.self, from: Data(bindings.stdout.utf8)).data.map(\.id) == [binding.id])

        let invalid = try await ServerProcess.run(
            ["bindings", "add", "--identity", "bob", "--type", "apns_voip", "--push-token", "nothex"], directory: directory.path, environment: withKey)
        #expect(invalid.status == 1)
        #expect(invalid.stderr.contains("invalid_token"))

        let deleted = try await ServerProcess.run(["bindings", "delete", binding.id], directory: directory.path, environment: withKey)
        #expect(deleted.status == 0)
        let wrongToken = try await ServerProcess.run(["accounts", "list", "--token", "wrong-token"], directory: directory.path, environment: ["RINGRELAY_URL": url])
        #expect(wrongToken.status == 1)
        #expect(wrongToken.stderr.contains("401"))
        let removed = try await ServerProcess.run(["accounts", "delete", account.id], directory: directory.path, environment: admin)
        #expect(removed.status == 0)
        #expect(try await Self.request(.GET, url + "/v1/bindings", token: account.apiKey).0 == 401)

        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
    }

    /// `ringrelay calls list`: the history as a table, one page at a time or all of it, and as JSON.
    @Test func callsListReadsTheHistory() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken], directory: directory.path)
        let url = try await server.waitUntilListening()
        let (_, accountData) = try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"history"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        // An FCM binding makes Bob reachable; without FCM credentials nothing leaves the machine.
        #expect(try await Self.request(.POST, url + "/v1/bindings", token: key, body: #"{"identity":"bob","type":"fcm","token":"bob-fcm"}"#).0 == 201)
        var ids: [String] = []
        for _ in 0..<3 {
            let (status, data) = try await Self.request(.POST, url + "/v1/calls", token: key, body: #"{"from":"alice","to":"bob"}"#)
            #expect(status == 201, "\(String(decoding: data, as: UTF8.self))")
            ids.append(try JSONDecoder.ringRelay.decode(CallResource.self, from: data).id)
        }
        let withKey = ["RINGRELAY_URL": url, "RINGRELAY_TOKEN": key]

        let json = try await ServerProcess.run(["calls", "list", "--identity", "bob", "--json"], directory: directory.path, environment: withKey)
        #expect(json.status == 0, "\(json.stderr)")
        let page = try JSONDecoder.ringRelay.decode(CallList.self, from: Data(json.stdout.utf8))
        #expect(Set(page.data.map(\.id)) == Set(ids))
        #expect(page.data.allSatisfy { $0.from == "alice" && $0.to == "bob" && $0.state == "ringing" })

        let firstPage = try await ServerProcess.run(["calls", "list", "--limit", "2"], directory: directory.path, environment: withKey)
        #expect(firstPage.status == 0, "\(firstPage.stderr)")
        #expect(firstPage.stdout.contains("ANSWERED BY"))
        #expect(firstPage.stdout.contains("More calls: --cursor "))
        let everything = try await ServerProcess.run(
            ["calls", "list", "--limit", "2", "--all", "--direction", "outgoing", "--identity", "alice", "--state", "ringing"],
            directory: directory.path, environment: withKey)
        #expect(everything.status == 0, "\(everything.stderr)")
        #expect(ids.allSatisfy(everything.stdout.contains))
        #expect(!everything.stdout.contains("More calls"))

        let invalid = try await ServerProcess.run(["calls", "list", "--since", "yesterday"], directory: directory.path, environment: withKey)
        #expect(invalid.status == 1)
        #expect(invalid.stderr.contains("invalid_parameter"))

        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
    }

    /// The README's APNs walk-through: the simulator, a server pointed at it, and a test push.
    @Test func testPushThroughTheSimulatorFromTheCommandLine() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let p8 = TestCredentials.apnsP8()
        try p8.write(toFile: directory.appending("AuthKey_KEY1234567.p8"), atomically: true, encoding: .utf8)
        let simulator = try ServerProcess(
            ["simulate", "apns", "--port", "0", "--certificate-out", "apns-simulator.pem", "--key", "TEAM123456:KEY1234567:AuthKey_KEY1234567.p8",
             "--topic", "com.example.app"],
            directory: directory.path)
        let apnsURL = try await simulator.waitUntilListening()
        #expect(apnsURL.hasPrefix("https://"))

        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--admin-token", adminToken, "--apns-endpoint-production", apnsURL,
             "--apns-endpoint-sandbox", apnsURL, "--push-ca-file", "apns-simulator.pem"],
            directory: directory.path)
        let url = try await server.waitUntilListening()
        let (_, accountData) = try await Self.request(.POST, url + "/v1/accounts", token: adminToken, body: #"{"name":"walkthrough"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        let credential = try JSONSerialization.data(withJSONObject: [
            "teamId": "TEAM123456", "keyId": "KEY1234567", "privateKey": p8, "topic": "com.example.app",
        ])
        #expect(try await Self.request(.PUT, url + "/v1/credentials/apns", token: key, body: String(decoding: credential, as: UTF8.self)).0 == 200)

        let withKey = ["RINGRELAY_URL": url, "RINGRELAY_TOKEN": key]
        let added = try await ServerProcess.run(
            ["bindings", "add", "--identity", "alice", "--type", "apns_voip", "--push-token", String(repeating: "7c", count: 32), "--json"],
            directory: directory.path, environment: withKey)
        let binding = try JSONDecoder.ringRelay.decode(BindingResource.self, from: Data(added.stdout.utf8))
        let pushed = try await ServerProcess.run(["push", "test", "--binding", binding.id], directory: directory.path, environment: withKey)
        #expect(pushed.status == 0, "\(pushed.stdout) \(pushed.stderr)")
        #expect(pushed.stdout.contains("delivered: apns voip push, status 200"))
        try await Task.sleep(for: .milliseconds(100))
        #expect(simulator.stdout.contains("com.example.app.voip"))

        server.signal(SIGTERM)
        simulator.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
        #expect(try await simulator.waitForExit() == 0)
    }

    /// The benchmark verbs run end to end (tiny loads; the figures come from release builds).
    @Test func benchVerbsReportWithoutFailures() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for arguments in [
            ["bench", "apns", "--count", "100", "--concurrency", "10", "--json"],
            ["bench", "fcm", "--count", "100", "--concurrency", "10", "--json"],
            ["bench", "webhooks", "--rate", "20", "--duration", "1", "--callees", "2", "--json"],
            ["bench", "live", "--devices", "50", "--rate", "20", "--duration", "1", "--settle", "1", "--json"],
            ["bench", "live", "--devices", "20", "--rate", "20", "--duration", "1", "--settle", "1", "--sealed-boxes", "5", "--json"],
        ] {
            let run = try await ServerProcess.run(arguments, directory: directory.path)
            #expect(run.status == 0, "\(arguments): \(run.stderr)")
            let result = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
            #expect(result?["failures"] as? Int == 0, "\(arguments): \(run.stdout)")
            if arguments[1] == "webhooks" {
                // The open loop's 20 webhooks, each timed from its send to its push at the simulator.
                #expect(result?["pushesArrived"] as? Int == 20, "\(run.stdout)")
                #expect(result?["loadCPUMicrosecondsPerWebhook"] is Double, "\(run.stdout)")
            }
            if arguments.contains("--sealed-boxes") {
                // Every other call was sealed, and each of those rang its device with its box.
                #expect(result?["sealedRings"] as? Int == 10, "\(run.stdout)")
            }
        }
        // `bench sealed` fails on its first invite that does not open: a run that reports them all opened them all.
        let sealed = try await ServerProcess.run(["bench", "sealed", "--count", "20", "--json"], directory: directory.path)
        #expect(sealed.status == 0, "\(sealed.stderr)")
        let result = try JSONSerialization.jsonObject(with: Data(sealed.stdout.utf8)) as? [String: Any]
        #expect(result?["invites"] as? Int == 20, "\(sealed.stdout)")
        #expect((result?["boxCharacters"] as? Int ?? 0) > 0, "\(sealed.stdout)")
    }

    /// `serve`'s global executor runs Swift concurrency's jobs on NIO's event loops without sending
    /// each call into a nonisolated async function back through a loop's queue (NIO's own hook runs
    /// jobs isolated to the loop, and there each such call is a round trip: ~150 per webhook).
    @Test func theGlobalExecutorKeepsNonisolatedCallsInline() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let run = try await ServerProcess.run(["bench", "executor", "--hops", "20000", "--json"], directory: directory.path)
        #expect(run.status == 0, "\(run.stderr)")
        let result = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        #expect(result?["executor"] as? String == "generic", "\(run.stdout)")
        // 20,000 steps of three layers each; the few jobs are the task's start and its end.
        let perHop = try #require(result?["jobsEnqueuedPerHop"] as? Double, "\(run.stdout)")
        #expect(perHop < 0.01, "\(run.stdout)")
    }

    /// The benches against nginx (and wrk from a second process): every push arrives once.
    @Test func nginxBenchesCountEveryPushOnce() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let webhooks = try await ServerProcess.run(
            ["bench", "webhooks", "--apns", "nginx", "--wrk", "--count", "300", "--connections", "4", "--callees", "3", "--json"],
            directory: directory.path)
        #expect(webhooks.status == 0, "\(webhooks.stderr.suffix(2000))")
        let result = try JSONSerialization.jsonObject(with: Data(webhooks.stdout.utf8)) as? [String: Any]
        #expect(result?["failures"] as? Int == 0, "\(webhooks.stdout)")
        #expect(result?["pushesArrived"] as? Int == 300, "\(webhooks.stdout)")
        #expect(result?["duplicates"] as? Int == 0, "\(webhooks.stdout)")

        #expect(result?["serverAllocator"] as? String == "glibc malloc", "\(webhooks.stdout)")
        // The server's work per webhook, read from /proc: each webhook is answered with at least one
        // write to its socket, and its push is another.
        let work = result?["serverWork"] as? [String: Double]
        #expect((work?["writeCalls"] ?? 0) >= 2, "\(webhooks.stdout)")
        #expect((work?["readCalls"] ?? 0) > 0, "\(webhooks.stdout)")
        #expect((work?["kibWritten"] ?? 0) > 0, "\(webhooks.stdout)")
        #expect(work?["cpuMicroseconds"] == result?["serverCPUMicrosecondsPerWebhook"] as? Double, "\(webhooks.stdout)")

        // The fan-out runs the server on jemalloc, preloaded as the container image preloads it
        // (scripts/test installs libjemalloc2): every push still arrives once, and the report says
        // which allocator served.
        let fanout = try await ServerProcess.run(
            ["bench", "fanout", "--devices", "100", "--calls", "1", "--json"], directory: directory.path,
            environment: ["LD_PRELOAD": "libjemalloc.so.2"])
        #expect(fanout.status == 0, "\(fanout.stderr.suffix(2000))")
        let report = try JSONSerialization.jsonObject(with: Data(fanout.stdout.utf8)) as? [String: Any]
        let runs = report?["runs"] as? [[String: Any]]
        #expect(runs?.first?["arrivedAtServer"] as? Int == 100, "\(fanout.stdout)")
        #expect(runs?.first?["duplicates"] as? Int == 0, "\(fanout.stdout)")
        #expect(report?["allocator"] as? String == "jemalloc", "\(fanout.stdout)")
        #expect(!fanout.stderr.contains("cannot be preloaded"), "\(fanout.stderr.suffix(2000))")

        // Through another door (nginx behind its own TLS front), and at an endpoint the bench did
        // not start, timed by the server's own push count: both on a clock finer than the second
        // (whole seconds once made 0.000 s and "inf pushes/s" of a fast call).
        let fronted = try await ServerProcess.run(
            ["bench", "fanout", "--door", "nginx-tls-front", "--devices", "200", "--calls", "2", "--json"], directory: directory.path)
        #expect(fronted.status == 0, "\(fronted.stderr.suffix(2000))")
        let frontReport = try JSONSerialization.jsonObject(with: Data(fronted.stdout.utf8)) as? [String: Any]
        #expect(frontReport?["endpoint"] as? String == "nginx-tls-front", "\(fronted.stdout)")
        for run in frontReport?["runs"] as? [[String: Any]] ?? [] {
            #expect(run["arrivedAtServer"] as? Int == 200, "\(fronted.stdout)")
            #expect(run["duplicates"] as? Int == 0, "\(fronted.stdout)")
            #expect((run["outcomes"] as? [String: Int]) == ["delivered": 200], "\(fronted.stdout)")
        }
        let door = try await InteropDoor.start(.nginxDirect)
        defer { door.stop() }
        let external = try await ServerProcess.run(
            ["bench", "fanout", "--endpoint", door.url, "--ca-file", door.caFile, "--devices", "100", "--calls", "1", "--json"],
            directory: directory.path)
        #expect(external.status == 0, "\(external.stderr.suffix(2000))")
        let externalRun = ((try JSONSerialization.jsonObject(with: Data(external.stdout.utf8)) as? [String: Any])?["runs"] as? [[String: Any]])?.first
        let seconds = externalRun?["seconds"] as? Double ?? 0
        #expect(seconds > 0 && seconds < 30 && seconds.rounded() != seconds, "\(external.stdout)")
        #expect((externalRun?["outcomes"] as? [String: Int]) == ["delivered": 100], "\(external.stdout)")
        #expect(door.processedRequests().count == 101, "the 100 pushes and the warm-up's")
    }
}
