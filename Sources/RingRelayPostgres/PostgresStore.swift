import Foundation
import Logging
import PostgresNIO
import RingRelayCore

/// The shared store: one PostgreSQL database that any number of RingRelay instances use at once.
///
/// It answers as ``DataStore`` says, exactly as the embedded SQLite store does, with one
/// difference that matters: other instances write the same rows. So it keeps no copy of what the
/// database holds (no binding, key or call cache; each read is a statement), and every rule
/// that must hold across instances is one statement whose `WHERE` clause or unique index is the
/// rule: a call changes state only from the states the change names, one notification id rings
/// once, one token is one binding, the first value of a setting wins.
///
/// Only this process's delivery records are held back, written behind as SQLite's are (see
/// ``CallStore/recordDeliveries(_:)``).
///
/// A database that cannot be reached answers `store_unavailable` (503), never a defect (500):
/// each statement takes a connection from a small pool, which opens a new one when the last
/// failed, so service resumes with the database.
///
/// ```swift
/// let store = try await PostgresStore.open(url: try PostgresDatabaseURL("postgres://ringrelay:secret@db:5432/ringrelay"), logger: logger)
/// ```
public final class PostgresStore: DataStore {
    let pool: PostgresConnectionPool
    let logger: Logger
    let backlog = DeliveryBacklog()
    /// Held while delivery records are written, so a read waits for a write in flight.
    let deliveryWrites = AsyncMutex()

    private init(pool: PostgresConnectionPool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Connects to the database at `url` and applies pending migrations, once however many
    /// instances start together.
    ///
    /// - Parameters:
    ///   - url: the database; its password never reaches a log or an error.
    ///   - logger: where migrations are reported.
    ///   - maximumConnections: connections this instance opens at most.
    /// - Throws: ``RingRelayError`` `store_unavailable` when the database cannot be reached or
    ///   was written by a newer RingRelay.
    public static func open(url: PostgresDatabaseURL, logger: Logger, maximumConnections: Int = 10) async throws -> PostgresStore {
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try url.connectionConfiguration()
        } catch {
            throw RingRelayError(.unavailable, code: .storeUnavailable, "Cannot set up TLS for PostgreSQL at \(url).", underlying: error)
        }
        let store = PostgresStore(
            pool: PostgresConnectionPool(configuration: configuration, maximum: maximumConnections, logger: logger), logger: logger)
        let newer: Int?
        do {
            newer = try await store.migrate()
        } catch {
            await store.pool.close()
            throw RingRelayError(
                .unavailable, code: .storeUnavailable,
                "Cannot open the PostgreSQL database at \(url); check that it runs and that the user, password and database are right.",
                underlying: (error as? RingRelayError)?.underlying ?? error)
        }
        // A database a newer RingRelay wrote is never read (it may mean something this one does
        // not know) nor migrated down.
        if let newer {
            await store.pool.close()
            throw RingRelayError(
                .unavailable, code: .storeUnavailable,
                "The database at \(url) was written by a newer RingRelay (schema \(newer); this one knows up to \(PostgresMigration.latest)). Run that version, or restore a backup made by this one."
            )
        }
        return store
    }

    public func close() async throws {
        // Records still held back are written first; when the database is gone, they cannot be.
        do {
            try await flushDeliveries()
        } catch {
            logger.error("could not record deliveries while closing", metadata: ["error.cause": .string("\(error)")])
        }
        await pool.close()
    }

    public var queueDelay: Duration { pool.queueDelay }

    public func ping() async throws {
        _ = try await rows("SELECT 1")
    }

    /// The schema version now in the database.
    public func schemaVersion() async throws -> Int {
        try await withConnection { try await Self.schemaVersion(on: $0, logger: self.logger) }
    }

    /// Records a schema version as applied, as a newer RingRelay would (tests of the refusal).
    package func markSchemaVersionForTesting(_ version: Int) async throws {
        _ = try await rows("INSERT INTO schema_migrations (version, name, applied_at) VALUES (\(version), 'from a newer version', 0)")
    }

    /// Makes every delivery write fail as on a full disk (`true`: a trigger raises SQLSTATE 53100)
    /// or succeed again (tests of what a failing database does to acknowledged work).
    package func failDeliveryWritesForTesting(_ failing: Bool) async throws {
        if failing {
            _ = try await rows(
                """
                CREATE OR REPLACE FUNCTION ringrelay_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS
                $$ BEGIN RAISE EXCEPTION 'no space left (a test)' USING ERRCODE = 'disk_full'; END $$
                """)
            _ = try await rows(
                "CREATE TRIGGER ringrelay_test_disk_full BEFORE INSERT OR UPDATE ON deliveries FOR EACH ROW EXECUTE FUNCTION ringrelay_test_disk_full()")
        } else {
            _ = try await rows("DROP TRIGGER IF EXISTS ringrelay_test_disk_full ON deliveries")
        }
    }

    // MARK: - Plumbing

    /// Runs `body` on a pooled connection; errors come out as ``RingRelayError``.
    func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await pool.withConnection(body)
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Runs one statement and returns its rows.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        try await withConnection { connection in
            try await connection.query(query, logger: self.logger).collect().map { $0.makeRandomAccess() }
        }
    }

    /// The advisory lock migrations run under: one instance migrates, the others wait and then
    /// find nothing left to do. ("RingRela" in ASCII.)
    private static let migrationLock: Int64 = 0x5269_6E67_5265_6C61

    /// Applies pending migrations under the migration lock.
    ///
    /// - Returns: the database's schema version when it is newer than this binary knows (and
    ///   nothing was applied), else `nil`.
    private func migrate() async throws -> Int? {
        try await withConnection { connection in
            _ = try await connection.query("SELECT pg_advisory_lock(\(Self.migrationLock))", logger: self.logger)
            do {
                let newer = try await self.applyMigrations(on: connection)
                _ = try await connection.query("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger: self.logger)
                return newer
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.migrationLock))", logger: self.logger)
                throw error
            }
        }
    }

    /// Applies the pending migrations, each in a transaction with its record; the caller holds
    /// the migration lock. Returns the schema version when it is newer than this binary knows.
    private func applyMigrations(on connection: PostgresConnection) async throws -> Int? {
        _ = try await connection.query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
            logger: logger)
        let current = try await Self.schemaVersion(on: connection, logger: logger)
        guard current <= PostgresMigration.latest else { return current }
        for migration in PostgresMigration.all where migration.version > current {
            try await connection.withTransaction(logger: logger) { connection in
                for statement in migration.statements {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                }
                _ = try await connection.query(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (\(migration.version), \(migration.name), \(Date().millis))",
                    logger: self.logger)
            }
            logger.info("applied migration", metadata: ["store.migration": "\(migration.version) \(migration.name)"])
        }
        return nil
    }

    private static func schemaVersion(on connection: PostgresConnection, logger: Logger) async throws -> Int {
        let rows = try await connection.query("SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations", logger: logger).collect()
        return try rows.first?.makeRandomAccess().integer("v") ?? 0
    }

    // MARK: - Settings

    public func setting(named name: String, orInsert makeValue: @Sendable () -> Data) async throws -> Data {
        let value = makeValue()
        // Insert if absent, then read: the first writer wins (a concurrent insert of the same
        // name waits for the first to commit and then inserts nothing), later callers read it.
        return try await withConnection { connection in
            _ = try await connection.query(
                "INSERT INTO settings (name, value) VALUES (\(name), \(value)) ON CONFLICT (name) DO NOTHING", logger: self.logger)
            let rows = try await connection.query("SELECT value FROM settings WHERE name = \(name)", logger: self.logger).collect()
            return try rows.first?.makeRandomAccess()["value"].decode(Data.self) ?? value
        }
    }
}
