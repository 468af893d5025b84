import Foundation
import RingRelayCore
import RingRelayPostgres
import RingRelayStore
import RingRelayTesting
import Testing

/// The engines behind ``DataStore``: every conformance test runs on each, a real SQLite file
/// and a real PostgreSQL server (``PostgresTestCluster``).
enum StoreEngine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres

    var testDescription: String { rawValue }

    /// A new, empty store of this engine.
    func makeStore() async throws -> StoreUnderTest {
        switch self {
        case .sqlite:
            let directory = try TemporaryDirectory()
            let path = directory.appending("ringrelay.sqlite")
            return StoreUnderTest(
                store: try await SQLiteStore.open(path: path, logger: TestLogging.logger("test")),
                reopen: { try await SQLiteStore.open(path: path, logger: TestLogging.logger("test")) },
                remove: { directory.remove() })
        case .postgres:
            let cluster = try await PostgresTestCluster.shared.value
            let url = try PostgresDatabaseURL(cluster.url(database: try await cluster.createDatabase()))
            return StoreUnderTest(
                store: try await PostgresStore.open(url: url, logger: TestLogging.logger("test")),
                reopen: { try await PostgresStore.open(url: url, logger: TestLogging.logger("test")) },
                // The database goes with the cluster when the process ends.
                remove: {})
        }
    }

    /// Makes delivery writes fail as on a full disk, or succeed again.
    func failDeliveryWrites(_ failing: Bool, in store: any DataStore) async throws {
        switch self {
        case .sqlite: try await #require(store as? SQLiteStore).limitGrowthForTesting(failing)
        case .postgres: try await #require(store as? PostgresStore).failDeliveryWritesForTesting(failing)
        }
    }

    /// Records `version` as applied, as a newer RingRelay would.
    func markSchemaVersion(_ version: Int, in store: any DataStore) async throws {
        switch self {
        case .sqlite: try await #require(store as? SQLiteStore).markSchemaVersionForTesting(version)
        case .postgres: try await #require(store as? PostgresStore).markSchemaVersionForTesting(version)
        }
    }
}

/// A store under test, and a second handle on the same data: the file opened again, or another
/// instance's connections to the same database.
struct StoreUnderTest: Sendable {
    let store: any DataStore
    /// Opens the same data again.
    let reopen: @Sendable () async throws -> any DataStore
    /// Removes the data (the SQLite file's directory).
    let remove: @Sendable () -> Void

    /// A new account with one key, whose secret hash is `keyHash`.
    func makeAccount(_ name: String = "acme", keyHash: String = "h", at date: Date = Date()) async throws -> Account {
        let account = Account(id: ResourceID.make(ResourceID.account, at: date), name: name, createdAt: date)
        try await store.createAccount(
            account,
            firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: keyHash, hint: "abcd", createdAt: date))
        return account
    }
}
