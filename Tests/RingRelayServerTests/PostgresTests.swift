import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PostgresNIO
import RingRelayCore
import RingRelayPostgres
import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

/// What only the PostgreSQL store does: its URL, migrations shared by instances, and what it
/// answers when the database cannot be reached. (Everything both engines do is in
/// StoreConformanceTests.)
@Suite struct PostgresStoreTests {
    @Test func databaseURLsAreReadAsLibpqReadsThemAndNeverShowThePassword() throws {
        let url = try PostgresDatabaseURL("postgresql://ring%40relay:p%2Fss%3Aw0rd@db.example.com:6543/ring_relay?sslmode=require&connect_timeout=3")
        #expect(url.username == "ring@relay")
        #expect(url.password == "p/ss:w0rd")
        #expect(url.host == "db.example.com")
        #expect(url.port == 6543)
        #expect(url.database == "ring_relay")
        #expect(url.sslMode == .require)
        #expect(url.connectTimeout == 3)
        #expect(url.description == "postgres://ring@relay:***@db.example.com:6543/ring_relay")
        #expect(!String(reflecting: url).contains("w0rd"))
        var dumped = ""
        dump(url, to: &dumped)
        #expect(!dumped.contains("w0rd"), "\(dumped)")

        let socket = try PostgresDatabaseURL("postgres://ringrelay@/ringrelay?host=/var/run/postgresql")
        #expect(socket.socketDirectory == "/var/run/postgresql")
        #expect(socket.port == 5432)
        #expect(socket.password == nil)
        #expect(socket.sslMode == .prefer)

        for bad in [
            "mysql://u:hunter2-secret@h/db", "postgres://u:hunter2-secret@h", "postgres://:hunter2-secret@h/db",
            "postgres://u:hunter2-secret@h/db?sslmode=allow", "postgres://u:hunter2-secret@h/db?application_name=x",
            "postgres://u:hunter2-secret@h/db?connect_timeout=0",
            "postgres://u:hunter2-secret@:5432/db",
        ] {
            #expect(throws: PostgresDatabaseURL.Invalid.self, "\(bad)") { try PostgresDatabaseURL(bad) }
            do {
                _ = try PostgresDatabaseURL(bad)
            } catch {
                #expect(!error.description.contains("hunter2"), "\(error.description)")
            }
        }
    }

    /// `--database-url` / `RINGRELAY_DATABASE_URL` is a secret: a bad one is refused without
    /// being quoted, and a good one never shows its password in the configuration's text.
    @Test func theDatabaseURLSettingIsASecret() async throws {
        func configuration(_ url: String) async throws -> ServerConfiguration {
            try ServerConfiguration(
                reader: try await ServerConfiguration.reader(flags: [:], environment: ["RINGRELAY_DATABASE_URL": url], dotEnvPath: "/nonexistent"))
        }
        let good = try await configuration("postgres://ringrelay:hunter2-secret@127.0.0.1:5432/ringrelay")
        #expect(good.databaseURL?.database == "ringrelay")
        #expect(!String(describing: good).contains("hunter2"))
        do {
            _ = try await configuration("postgres://ringrelay:hunter2-secret@127.0.0.1:5432")
            Issue.record("a URL without a database was taken")
        } catch let error as ConfigurationError {
            #expect(error.key == .databaseURL)
            #expect(error.description.contains("RINGRELAY_DATABASE_URL"))
            #expect(!error.description.contains("hunter2"), "\(error.description)")
        }
    }

    /// A database that does not answer, or refuses the password, is `store_unavailable`, and
    /// neither the message nor its logged cause holds the password.
    @Test func anUnreachableDatabaseIsUnavailableAndTheErrorKeepsThePasswordSecret() async throws {
        let nobody = try CLITests.unusedPort()
        let cluster = try await PostgresTestCluster.shared.value
        let urls = [
            "postgres://ringrelay:hunter2-secret@127.0.0.1:\(nobody)/ringrelay?sslmode=disable",
            "postgres://\(PostgresTestCluster.user):hunter2-secret@127.0.0.1:\(cluster.port)/postgres?sslmode=disable",
        ]
        for text in urls {
            do {
                _ = try await PostgresStore.open(url: try PostgresDatabaseURL(text), logger: TestLogging.logger("test"))
                Issue.record("opened \(text)")
            } catch let error as RingRelayError {
                #expect(error.kind == .unavailable)
                #expect(error.code == RingRelayError.Code.storeUnavailable.rawValue)
                #expect(error.message.contains(":***@127.0.0.1"), "\(error.message)")
                #expect(!"\(error)".contains("hunter2"), "\(error)")
                // The logged cause names what happened (postgres-nio's own says only "Generic description").
                #expect("\(error)".contains("PostgreSQL client connectionError") || "\(error)".contains("PostgreSQL 28P01"), "\(error)")
            }
        }
    }

    /// Instances started together migrate once: the advisory lock makes the others wait, and
    /// they find the schema complete (without it they fail on each other's CREATE TABLE).
    @Test func instancesStartingTogetherMigrateOnce() async throws {
        let cluster = try await PostgresTestCluster.shared.value
        let database = try await cluster.createDatabase()
        let url = try PostgresDatabaseURL(cluster.url(database: database))
        let stores = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
            for _ in 0..<6 {
                group.addTask { try await PostgresStore.open(url: url, logger: TestLogging.logger("test")) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for store in stores {
            #expect(try await store.schemaVersion() == PostgresMigration.latest)
        }
        let applied = try await cluster.query("SELECT COUNT(*)::bigint AS n FROM schema_migrations", database: database)
        #expect(applied == PostgresMigration.all.count)
        for store in stores { try await store.close() }
    }
}

extension PostgresStoreTests {
    /// Every shape of the history statements reads one range of a history index per part,
    /// newest first (`Index Scan Backward`, the range in the index condition), whatever the
    /// account's size: no table scan, and no sort but that of two page-sized parts merged.
    @Test func aHistoryPageReadsOneIndexRangePerPart() async throws {
        let cluster = try await PostgresTestCluster.shared.value
        let store = try await PostgresStore.open(
            url: try PostgresDatabaseURL(cluster.url(database: try await cluster.createDatabase())), logger: TestLogging.logger("test"))
        for (query, indexes) in CallHistoryTests.historyShapes {
            let plans = try await store.callHistoryPlan(accountID: "acc_x", query: query)
            // With a state filter, one window statement per index comes before the page's.
            #expect(plans.count == (query.states.isEmpty ? 1 : indexes.count + 1), "\(query): \(plans)")
            for (number, plan) in plans.enumerated() {
                let expected = number == plans.count - 1 ? indexes : [indexes[number]]
                // A ring group's later identities lead from call_members to their calls (alias c), one
                // row each by key: those lookups are not range reads.
                let reads = plan.split(separator: "\n").filter { $0.contains(" Scan") && !$0.contains(" on calls c ") }
                #expect(reads.count == expected.count, "\(query): \(plan)")
                for index in expected {
                    #expect(reads.contains { $0.contains("Scan Backward using \(index) on call") }, "\(query): \(plan)")
                }
                #expect(
                    plan.split(separator: "\n").filter { $0.contains("Index Cond") && !$0.contains("(id = m.call_id)") }.allSatisfy {
                        $0.contains("created_at, id) >=") || $0.contains("created_at, call_id) >=")
                    },
                    "\(query): \(plan)")
                if expected.count == 1 {
                    #expect(!plan.contains("Sort"), "\(query): \(plan)")
                }
            }
        }
        try await store.close()
    }
}

/// The real `ringrelay serve` on PostgreSQL.
@Suite(.serialized) struct PostgresProcessTests {
    let adminToken = "postgres-test-admin-token-0123456789"

    private func serve(_ url: String, in directory: TemporaryDirectory, dataDir: String) throws -> ServerProcess {
        try ServerProcess(
            ["serve", "--port", "0", "--data-dir", dataDir, "--admin-token", adminToken, "--rate-limit", "0"], directory: directory.path,
            environment: ["RINGRELAY_DATABASE_URL": url])
    }

    /// Accounts, bindings and calls live in the database: a restarted server, even with another
    /// (empty) data directory, reads them back exactly.
    @Test func whatOneProcessWroteTheNextReadsBack() async throws {
        let cluster = try await PostgresTestCluster.shared.value
        let url = cluster.url(database: try await cluster.createDatabase())
        let directory = try TemporaryDirectory()
        defer { directory.remove() }

        let first = try serve(url, in: directory, dataDir: "one")
        let firstURL = try await first.waitUntilListening()
        let (status, accountData) = try await ProcessTests.request(.POST, firstURL + "/v1/accounts", token: adminToken, body: #"{"name":"acme"}"#)
        #expect(status == 201)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        let binding = #"{"identity":"bob","type":"fcm","token":"bob-token-1","deviceId":"b1"}"#
        #expect(try await ProcessTests.request(.POST, firstURL + "/v1/bindings", token: key, body: binding).0 == 201)
        let (callStatus, callData) = try await ProcessTests.request(.POST, firstURL + "/v1/calls", token: key, body: #"{"from":"alice","to":"bob"}"#)
        #expect(callStatus == 201, "\(String(decoding: callData, as: UTF8.self))")
        let call = try JSONDecoder.ringRelay.decode(CallResource.self, from: callData)
        let before = try await Self.reads(firstURL, key: key, callID: call.id, admin: adminToken)
        first.signal(SIGTERM)
        #expect(try await first.waitForExit() == 0)

        let second = try serve(url, in: directory, dataDir: "two")
        let secondURL = try await second.waitUntilListening()
        #expect(!second.stdout.contains("RINGRELAY_TOKEN="), "the default account is made once per database")
        #expect(try await Self.reads(secondURL, key: key, callID: call.id, admin: adminToken) == before)
        second.signal(SIGTERM)
        #expect(try await second.waitForExit() == 0)
        for process in [first, second] {
            #expect(!process.stderr.contains(PostgresTestCluster.password), "the database password reached the log")
        }
    }

    /// What a server answers about the account's data: its accounts, bindings and one call.
    private static func reads(_ base: String, key: String, callID: String, admin: String) async throws -> [String] {
        var bodies: [String] = []
        for (path, token) in [("/v1/accounts", admin), ("/v1/bindings", key), ("/v1/calls/\(callID)", key), ("/v1/calls", key)] {
            let (status, data) = try await ProcessTests.request(.GET, base + path, token: token)
            #expect(status == 200, "\(path): \(String(decoding: data, as: UTF8.self))")
            bodies.append(String(decoding: data, as: UTF8.self))
        }
        return bodies
    }

    /// PostgreSQL stopped under a running server: the API answers 503 (never 500), /readyz
    /// fails, and once PostgreSQL is back the same process serves again.
    @Test func aStoppedDatabaseIs503AndServiceResumesWithIt() async throws {
        try await withClusterOfItsOwn { cluster, base, key in
        #expect(try await ProcessTests.request(.GET, base + "/readyz", token: adminToken).0 == 200)

        try await cluster.stopServer()
        let requests: [(method: HTTPMethod, path: String, token: String, body: String?)] = [
            (.GET, "/v1/accounts", adminToken, nil),
            (.GET, "/v1/bindings", key, nil),
            (.POST, "/v1/bindings", key, #"{"identity":"bob","type":"fcm","token":"t-down","deviceId":"b1"}"#),
            (.POST, "/v1/calls", key, #"{"from":"alice","to":"bob"}"#),
            (.GET, "/readyz", adminToken, nil),
        ]
        for request in requests {
            let (status, data) = try await ProcessTests.request(request.method, base + request.path, token: request.token, body: request.body)
            #expect(status == 503, "\(request.method) \(request.path): \(status) \(String(decoding: data, as: UTF8.self))")
            if request.path != "/readyz" {
                #expect(String(decoding: data, as: UTF8.self).contains("store_unavailable"), "\(String(decoding: data, as: UTF8.self))")
            }
        }

        try await cluster.startServer()
        #expect(
            await eventually(timeout: .seconds(60)) {
                (try? await ProcessTests.request(.GET, base + "/readyz", token: adminToken))?.0 == 200
            })
        #expect(try await ProcessTests.request(.GET, base + "/v1/accounts", token: adminToken).0 == 200)
        #expect(try await ProcessTests.request(.POST, base + "/v1/bindings", token: key, body: requests[2].body).0 == 201)
        #expect(try await ProcessTests.request(.POST, base + "/v1/calls", token: key, body: requests[3].body).0 == 201)
        }
    }

    /// PostgreSQL restarted while clients keep writing: every answer is a success or a 503 (never
    /// a 500 or a dropped connection), and every binding whose creation was acknowledged (201) is
    /// there afterwards.
    @Test func aDatabaseRestartUnderLoadLosesNothingAcknowledged() async throws {
        try await withClusterOfItsOwn { cluster, base, key in

        let tally = RestartTally()
        let writers = (0..<4).map { writer in
            Task {
                var sequence = 0
                while tally.writing {
                    sequence += 1
                    let token = "restart-\(writer)-\(sequence)"
                    let body = #"{"identity":"bob","type":"fcm","token":"\#(token)"}"#
                    tally.record((try? await ProcessTests.request(.POST, base + "/v1/bindings", token: key, body: body).0) ?? -1, token: token)
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
        }
        _ = await eventually { tally.answered(201) >= 20 }
        try await cluster.stopServer()
        _ = await eventually { tally.answered(503) >= 20 }
        try await cluster.startServer()
        let before = tally.answered(201)
        let resumed = await eventually(timeout: .seconds(60)) { tally.answered(201) >= before + 20 }
        #expect(resumed, "service resumed")
        tally.stop()
        for writer in writers { await writer.value }

        let seen = tally.statuses
        #expect(Set(seen.keys).isSubset(of: [201, 503]), "only successes and 503s: \(seen)")
        var stored: Set<String> = []
        var cursor: String?
        repeat {
            let path = "/v1/bindings?limit=100" + (cursor.map { "&cursor=\($0)" } ?? "")
            let (_, data) = try await ProcessTests.request(.GET, base + path, token: key)
            let page = try JSONDecoder.ringRelay.decode(BindingList.self, from: data)
            stored.formUnion(page.data.map(\.token))
            cursor = page.nextCursor
        } while cursor != nil
        let lost = tally.acknowledged.subtracting(stored)
        #expect(lost.isEmpty, "acknowledged but gone: \(lost.sorted().prefix(5))")
        }
    }

    /// Runs `body` with a server on a PostgreSQL cluster of its own (which the test may stop and
    /// start: the shared one stays up for the other tests), its base URL and an account's key;
    /// then stops the server, which must exit cleanly without the password in its log.
    private func withClusterOfItsOwn(_ body: (PostgresTestCluster, String, String) async throws -> Void) async throws {
        let cluster = try await PostgresTestCluster.start()
        let url = cluster.url(database: try await cluster.createDatabase())
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try serve(url, in: directory, dataDir: "data")
        let base = try await server.waitUntilListening()
        let (_, accountData) = try await ProcessTests.request(.POST, base + "/v1/accounts", token: adminToken, body: #"{"name":"acme"}"#)
        let key = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: accountData).apiKey
        try await body(cluster, base, key)
        server.signal(SIGTERM)
        let status = try await server.waitForExit()
        #expect(status == 0, "exit \(status); the server's log: \(server.crashReport)")
        #expect(!server.stderr.contains(PostgresTestCluster.password), "the database password reached the log")
    }
}

/// What the writers of `aDatabaseRestartUnderLoadLosesNothingAcknowledged` saw.
private final class RestartTally: Sendable {
    private let state = Mutex((acknowledged: Set<String>(), statuses: [Int: Int](), writing: true))
    var writing: Bool { state.withLock { $0.writing } }
    func stop() { state.withLock { $0.writing = false } }
    func record(_ status: Int, token: String) {
        state.withLock { state in
            state.statuses[status, default: 0] += 1
            if status == 201 { state.acknowledged.insert(token) }
        }
    }
    func answered(_ status: Int) -> Int { state.withLock { $0.statuses[status] ?? 0 } }
    var statuses: [Int: Int] { state.withLock { $0.statuses } }
    var acknowledged: Set<String> { state.withLock { $0.acknowledged } }
}
