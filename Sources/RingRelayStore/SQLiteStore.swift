import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOPosix
import RingRelayCore
import SQLiteNIO
import Synchronization
import RingRelayWire

/// The embedded store: one SQLite file in WAL mode.
///
/// All statements go through one connection under an ``AsyncMutex``, so a multi-statement
/// transaction never interleaves with another task's statements. Statements run on the calling
/// task's thread (see ``SQLiteHandle``); bulk work runs on NIO's thread pool. Once the log passes
/// ``checkpointFrames`` a task of its own checkpoints it through a second connection, beside the
/// statements (see ``checkpointIfDue()``). Times are stored as integer milliseconds since the Unix
/// epoch.
///
/// The hot path of a ring is kept off the disk where that is safe: active bindings and API keys
/// are answered from memory (this store is its file's only writer, and drops what it holds on
/// each write), and delivery records are written behind, many in one statement.
public final class SQLiteStore: DataStore {
    private let connection: SQLiteHandle
    private let mutex = AsyncMutex()
    /// A second connection that only checkpoints, and the lock it is used under (taken before
    /// ``mutex`` when both are needed).
    private let checkpointer: SQLiteHandle
    private let checkpointMutex = AsyncMutex()
    private let bindingCache = BindingCache()
    /// Unrevoked API keys by secret hash.
    private let keyCache = GenerationCache<APIKeyRecord>(maxAge: .seconds(600))
    private let backlog = DeliveryBacklog()
    /// ``createCall(_:)``'s rounds: calls that arrive while a round is written go in the next,
    /// one transaction.
    private let callInserts = GroupCommit<Call, CallCreation>()
    /// ``flushDeliveries()``'s rounds: one write of the backlog for everyone waiting.
    private let deliveryFlushes = GroupCommit<Void, Void>()
    private let callCache = CallCache()
    /// Call defaults by account id (written only through this store, so kept until written).
    private let callDefaultsCache = GenerationCache<CallDefaults>()
    /// Set once the connection is closed; read and written only while holding ``mutex``.
    private let isClosed = Mutex(false)
    /// Set while a checkpoint is scheduled or running.
    private let checkpointPending = Mutex(false)
    private let logger: Logger

    /// The database file's path.
    public let path: String

    private init(connection: SQLiteHandle, checkpointer: SQLiteHandle, path: String, logger: Logger) {
        self.connection = connection
        self.checkpointer = checkpointer
        self.path = path
        self.logger = logger
    }

    /// Opens (creating if needed) the database at `path` and applies pending migrations.
    ///
    /// - Parameters:
    ///   - path: the database file, e.g. `ringrelay-data/ringrelay.sqlite`.
    ///   - logger: where migrations are reported.
    /// - Throws: ``RingRelayError`` (`store_unavailable`) when the file cannot be opened or migrated.
    /// How hard each commit waits for the disk (SQLite's `synchronous` setting, in WAL mode).
    public enum Sync: String, Sendable, CaseIterable {
        /// A commit is in the log when it returns, and the log is synced at each checkpoint: a
        /// commit survives the process being killed at any moment (SIGKILL, a crash), but the last
        /// commits since the previous checkpoint can be lost if the machine loses power or the OS
        /// crashes. The database itself stays consistent either way.
        case normal
        /// The log is synced at every commit as well: a commit survives power loss too, at the
        /// cost of one disk flush per commit.
        case full
    }

    public static func open(path: String, logger: Logger, sync: Sync = .normal) async throws -> SQLiteStore {
        let connection: SQLiteHandle
        let checkpointer: SQLiteHandle
        do {
            connection = try await SQLiteHandle.open(path: path)
            do {
                checkpointer = try await SQLiteHandle.open(path: path)
            } catch {
                try? await connection.close()
                throw error
            }
        } catch {
            throw RingRelayError(
                .unavailable, code: .storeUnavailable,
                "Cannot open the SQLite database at \(path); check that the data directory is writable.",
                underlying: error)
        }
        let store = SQLiteStore(connection: connection, checkpointer: checkpointer, path: path, logger: logger)
        do {
            // WAL lets readers run beside the writer; NORMAL sync is durable across process
            // crashes and SIGKILL (only an OS crash can lose the last commits), FULL across power
            // loss too (see ``Sync``).
            _ = try connection.query("PRAGMA journal_mode = WAL")
            _ = try connection.query("PRAGMA synchronous = \(sync == .full ? "FULL" : "NORMAL")")
            // A log that grew past the checkpoint size in a burst (a checkpoint waiting its turn)
            // is cut back to it when it starts over, instead of keeping its largest size on disk.
            _ = try connection.query("PRAGMA journal_size_limit = \(Self.checkpointFrames * 4096)")
            // Statement journals (a multi-row upsert's undo pages) stay in memory: past 64 KiB
            // SQLite moved them to a temporary file, opened and deleted for each statement.
            _ = try connection.query("PRAGMA temp_store = MEMORY")
            _ = try connection.query("PRAGMA foreign_keys = ON")
            _ = try connection.query("PRAGMA busy_timeout = 5000")
            // A checkpoint syncs the log before copying it and the file after, as NORMAL asks.
            _ = try checkpointer.query("PRAGMA synchronous = NORMAL")
            _ = try checkpointer.query("PRAGMA busy_timeout = 5000")
            try await store.migrate()
            connection.forgetStatements()
        } catch {
            try? await checkpointer.close()
            try? await connection.close()
            // Our own refusals (a newer schema) keep their words.
            if let refusal = error as? RingRelayError { throw refusal }
            throw RingRelayError(
                .unavailable, code: .storeUnavailable, "Cannot prepare the SQLite database at \(path).",
                underlying: error)
        }
        return store
    }

    /// Closes the connection. Later calls fail with `store_closed`; closing twice is harmless.
    public func close() async throws {
        try await checkpointMutex.withLock { [connection, checkpointer] in
            try await self.mutex.withLock {
                guard !self.isClosed.withLock({ $0 }) else { return }
                do {
                    try self.writeBacklog(on: connection)
                } catch {
                    self.logger.error("delivery records lost on closing", metadata: ["error.cause": .string("\(error)")])
                }
                self.isClosed.withLock { $0 = true }
                // The main connection closes last: it checkpoints what is left and removes the log.
                try await checkpointer.close()
                try await connection.close()
            }
        }
    }

    private func checkOpen() throws {
        if isClosed.withLock({ $0 }) {
            throw RingRelayError(.unavailable, code: .storeClosed, "The database is closed; the server is shutting down.")
        }
    }

    /// Writes a consistent copy of the database file at `source` to `path`, a new file with mode
    /// 0600, while a server may be writing to it (SQLite's online backup API).
    ///
    /// The source is opened for reading only, with no migration and no setting changed: a backup
    /// made by another version leaves a running server's file as it was.
    public static func backup(databaseAt source: String, to path: String) async throws {
        // O_EXCL: never overwrite a file, even one made between a check and the copy.
        let descriptor = Glibc.open(path, O_CREAT | O_EXCL | O_WRONLY, 0o600)
        guard descriptor >= 0 else {
            let reason = errno == EEXIST ? "exists; name a new file" : "cannot be created: \(String(cString: strerror(errno)))"
            throw RingRelayError(.conflict, code: .invalidField, "\(path) \(reason).")
        }
        Glibc.close(descriptor)
        do {
            let handle = try await SQLiteHandle.open(path: source, readOnly: true)
            do {
                try await handle.backup(into: path)
            } catch {
                try? await handle.close()
                throw error
            }
            try await handle.close()
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw RingRelayError(.unavailable, code: .storeUnavailable, "Cannot back up \(source).", underlying: error)
        }
    }

    /// Records a schema version as applied, as a newer RingRelay would (tests of the refusal).
    package func markSchemaVersionForTesting(_ version: Int) async throws {
        _ = try await query(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from a newer version', 0)", [.integer(version)])
    }

    /// Stops the file from growing (`true`: SQLite answers `SQLITE_FULL`, as on a full disk) or
    /// lets it grow again (tests of what a failing database does to acknowledged work).
    package func limitGrowthForTesting(_ limited: Bool) async throws {
        // A limit below the file's size is raised to its size.
        _ = try await query("PRAGMA max_page_count = \(limited ? 1 : 1_073_741_823)")
    }

    /// The schema version now in the file.
    public func schemaVersion() async throws -> Int {
        let rows = try await query("SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations")
        return Int(rows.first?.column("v")?.integer ?? 0)
    }

    // MARK: - Plumbing

    private func query(_ sql: String, _ binds: [SQLiteData] = []) async throws -> [SQLiteResultRow] {
        try await locked { connection in try connection.query(sql, binds) }
    }

    /// Runs `body` with the connection while holding the lock: for a statement whose effect on
    /// what the store keeps in memory must be applied in the same order as in the file.
    private func locked<T: Sendable>(_ body: @Sendable (SQLiteHandle) async throws -> T) async throws -> T {
        try await mutex.withLock { [connection] in
            try self.checkOpen()
            defer { self.checkpointIfDue() }
            return try await body(connection)
        }
    }

    /// Frames (pages) the write-ahead log may hold before it is copied into the database file: 16 MiB
    /// of log. SQLite's own automatic checkpoint uses 1,000, but a call's rows and index entries
    /// land on pages all over the file, and a longer log copies each page that many commits
    /// changed once instead of again and again: four times the log took about a tenth off a
    /// webhook's CPU at full speed (docs/BENCHMARKS.md).
    public static let checkpointFrames = 4000

    /// At most this many frames are left for the checkpoint's last pass, the one statements wait
    /// behind.
    static let finishingFrames = 100

    /// Schedules a checkpoint when the log has grown past ``checkpointFrames``; the caller holds
    /// the mutex.
    ///
    /// The checkpoint waits for the disk twice (the log before copying, the file after), about
    /// ten milliseconds here, and statements must not wait that long behind it. So it runs in a
    /// task of its own on the second connection, beside the statements, and copies what the log
    /// holds, again while many pages came in meanwhile, and has the disk write the file and the
    /// log. Only to finish does it take the mutex, for the few pages committed since: with no
    /// commit in between, the copy is complete and the next commit starts the log over. (SQLite
    /// syncs the file only after a complete copy, so without the early sync the first full
    /// checkpoint of a new file, which grows it by megabytes, held the mutex for 80 ms.)
    private func checkpointIfDue() {
        guard connection.walFrames >= Self.checkpointFrames,
            checkpointPending.withLock({ pending in
                defer { pending = true }
                return !pending
            })
        else { return }
        Task {
            defer { self.checkpointPending.withLock { $0 = false } }
            do {
                try await self.checkpointMutex.withLock { [connection, checkpointer] in
                    guard !self.isClosed.withLock({ $0 }) else { return }
                    for _ in 0..<3 {
                        let pass = try await checkpointer.checkpoint()
                        if pass.frames - pass.copied < Self.finishingFrames { break }
                    }
                    try await checkpointer.syncFiles()
                    try await self.mutex.withLock {
                        guard !self.isClosed.withLock({ $0 }) else { return }
                        try await checkpointer.checkpoint()
                        connection.forgetWALFrames()
                    }
                }
            } catch {
                self.logger.warning("WAL checkpoint failed", metadata: ["error.cause": .string("\(error)")])
            }
        }
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`, rolling back on error.
    private func transaction<T: Sendable>(_ body: @Sendable (SQLiteHandle) async throws -> T) async throws -> T {
        try await locked { connection in
            _ = try connection.query("BEGIN IMMEDIATE")
            do {
                let result = try await body(connection)
                _ = try connection.query("COMMIT")
                return result
            } catch {
                _ = try? connection.query("ROLLBACK")
                throw error
            }
        }
    }

    private func migrate() async throws {
        _ = try await query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        let current = try await schemaVersion()
        // A file a newer RingRelay wrote is never read (it may mean something this one does not
        // know) nor migrated down.
        let known = Migration.sqlite.map(\.version).max() ?? 0
        guard current <= known else {
            throw RingRelayError(
                .unavailable, code: .dataDirUnusable,
                "The database was written by a newer RingRelay (schema \(current); this one knows up to \(known)). Run that version, or restore a backup made by this one.")
        }
        for migration in Migration.sqlite where migration.version > current {
            try await transaction { connection in
                for statement in migration.statements {
                    _ = try connection.query(statement)
                }
                _ = try connection.query(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    [.integer(migration.version), .text(migration.name), .integer(Date().millis)])
            }
            logger.info("applied migration", metadata: ["store.migration": "\(migration.version) \(migration.name)"])
        }
    }

    // MARK: - DataStore

    public func ping() async throws {
        _ = try await query("SELECT 1")
    }

    public func setting(named name: String, orInsert makeValue: @Sendable () -> Data) async throws -> Data {
        let value = makeValue()
        // INSERT OR IGNORE then SELECT: the first writer wins, later callers read its value.
        return try await transaction { connection in
            _ = try connection.query(
                "INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)",
                [.text(name), .blob(ByteBuffer(bytes: value))])
            let rows = try connection.query("SELECT value FROM settings WHERE name = ?", [.text(name)])
            guard let buffer = rows.first?.column("value")?.blob else { return value }
            return Data(buffer.readableBytesView)
        }
    }
}

// MARK: - Accounts

extension SQLiteStore {
    public func createAccount(_ account: Account, firstKey: APIKeyRecord) async throws {
        do {
            try await transaction { connection in
                _ = try connection.query(
                    "INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)",
                    [.text(account.id), .text(account.name), .integer(account.createdAt.millis)])
                _ = try connection.query(Self.insertKeySQL, Self.keyBinds(firstKey))
            }
        } catch let error as SQLiteStatementError where error.isConstraint {
            throw RingRelayError(
                .conflict, code: .accountNameTaken, "An account named '\(ClientText.echo(account.name))' already exists; pick another name.")
        }
    }

    public func listAccounts() async throws -> [Account] {
        try await query("SELECT id, name, created_at FROM accounts ORDER BY created_at, id").map(Self.account)
    }

    public func account(id: String) async throws -> Account? {
        try await query("SELECT id, name, created_at FROM accounts WHERE id = ?", [.text(id)]).first.map(Self.account)
    }

    public func deleteAccount(id: String) async throws -> Bool {
        let deleted = try await locked { connection in
            // Its bindings and calls go with it, possibly many rows: deleted on the thread pool.
            let rows = try await connection.offloaded { try $0.query("DELETE FROM accounts WHERE id = ? RETURNING id", [.text(id)]) }
            self.callCache.forgetAll()
            return !rows.isEmpty
        }
        bindingCache.invalidate(accountID: id)
        callDefaultsCache.forget(id)
        keyCache.forget { $1.accountID == id }
        return deleted
    }

    public func addKey(_ key: APIKeyRecord) async throws {
        _ = try await query(Self.insertKeySQL, Self.keyBinds(key))
    }

    public func revokeKey(accountID: String, keyID: String, at date: Date) async throws -> Bool {
        let revoked = try await !query(
            "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL RETURNING id",
            [.integer(date.millis), .text(keyID), .text(accountID)]
        ).isEmpty
        keyCache.forget { $1.id == keyID }
        return revoked
    }

    public func activeKey(secretHash: String) async throws -> APIKeyRecord? {
        let (cached, generation) = keyCache.lookup(secretHash)
        if let cached { return cached }
        let key = try await query(
            "SELECT id, account_id, secret_hash, hint, created_at, revoked_at FROM api_keys WHERE secret_hash = ? AND revoked_at IS NULL",
            [.text(secretHash)]
        ).first.map { row in
            APIKeyRecord(
                id: row.string("id"), accountID: row.string("account_id"), secretHash: row.string("secret_hash"),
                hint: row.string("hint"), createdAt: row.date("created_at"), revokedAt: row.optionalDate("revoked_at"))
        }
        // Only hits are kept: a guessed secret must not fill the cache.
        if let key { keyCache.store(key, for: secretHash, ifGeneration: generation) }
        return key
    }

    public func callDefaults(accountID: String) async throws -> CallDefaults {
        let (cached, generation) = callDefaultsCache.lookup(accountID)
        if let cached { return cached }
        let defaults =
            try await query("SELECT if_busy, notify_missed FROM account_call_defaults WHERE account_id = ?", [.text(accountID)]).first.map {
                CallDefaults(ifBusy: BusyPolicy(rawValue: $0.string("if_busy")) ?? .ring, notifyMissed: $0.column("notify_missed")?.integer == 1)
            } ?? CallDefaults()
        callDefaultsCache.store(defaults, for: accountID, ifGeneration: generation)
        return defaults
    }

    public func setCallDefaults(_ defaults: CallDefaults, accountID: String) async throws {
        _ = try await query(
            """
            INSERT INTO account_call_defaults (account_id, if_busy, notify_missed) VALUES (?, ?, ?)
            ON CONFLICT (account_id) DO UPDATE SET if_busy = excluded.if_busy, notify_missed = excluded.notify_missed
            """,
            [.text(accountID), .text(defaults.ifBusy.rawValue), .integer(defaults.notifyMissed ? 1 : 0)])
        callDefaultsCache.forget(accountID)
    }

    public func accountLimits(accountID: String) async throws -> AccountLimits {
        try await query(
            "SELECT rate_limit, rate_limit_burst, ring_timeout_seconds FROM account_limits WHERE account_id = ?", [.text(accountID)]
        ).first.map {
            AccountLimits(
                rateLimit: $0.column("rate_limit")?.double, rateLimitBurst: $0.column("rate_limit_burst")?.double,
                ringTimeoutSeconds: $0.column("ring_timeout_seconds")?.integer.map { Int($0) })
        } ?? .serverDefaults
    }

    public func setAccountLimits(_ limits: AccountLimits, accountID: String) async throws {
        _ = try await query(
            """
            INSERT INTO account_limits (account_id, rate_limit, rate_limit_burst, ring_timeout_seconds) VALUES (?, ?, ?, ?)
            ON CONFLICT (account_id) DO UPDATE SET rate_limit = excluded.rate_limit, rate_limit_burst = excluded.rate_limit_burst,
                ring_timeout_seconds = excluded.ring_timeout_seconds
            """,
            [
                .text(accountID), limits.rateLimit.map { .float($0) } ?? .null, limits.rateLimitBurst.map { .float($0) } ?? .null,
                limits.ringTimeoutSeconds.map { .integer($0) } ?? .null,
            ])
    }

    private static let insertKeySQL =
        "INSERT INTO api_keys (id, account_id, secret_hash, hint, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, NULL)"

    private static func keyBinds(_ key: APIKeyRecord) -> [SQLiteData] {
        [.text(key.id), .text(key.accountID), .text(key.secretHash), .text(key.hint), .integer(key.createdAt.millis)]
    }

    private static func account(_ row: SQLiteResultRow) -> Account {
        Account(id: row.string("id"), name: row.string("name"), createdAt: row.date("created_at"))
    }
}

// MARK: - Bindings

extension SQLiteStore {
    private static let bindingColumns = StoreSQL.bindingColumns

    public func upsertBinding(_ registration: BindingRegistration, newID: String, now: Date, room: BindingRoom) async throws -> BindingUpsert? {
        // One statement: the unique (account_id, type, token) index decides between insert and
        // update atomically, so two concurrent registrations of one token cannot create two rows.
        // The WHERE is the room: an active binding of this identity re-registered always goes
        // through; anything else only while the identity has fewer active bindings than its
        // limit, and a token the account does not have only while the account has room. (The
        // file has one writer: the count cannot change between the check and the insert.)
        let rows = try await query(
            """
            INSERT INTO bindings (\(Self.bindingColumns))
            SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'active', NULL, NULL, ?10, ?10, ?10
            WHERE EXISTS (
                    SELECT 1 FROM bindings WHERE account_id = ?2 AND type = ?4 AND token = ?5 AND identity = ?3 AND status = 'active')
                OR ((SELECT COUNT(*) FROM bindings WHERE account_id = ?2 AND identity = ?3 AND status = 'active') < ?11
                    AND (?12 OR EXISTS (SELECT 1 FROM bindings WHERE account_id = ?2 AND type = ?4 AND token = ?5)))
            \(StoreSQL.bindingUpsert)
            RETURNING \(Self.bindingColumns)
            """,
            [
                .text(newID), .text(registration.accountID), .text(registration.identity),
                .text(registration.type.rawValue), .text(registration.token),
                .optionalText(registration.environment?.rawValue), .integer(registration.environmentIsExplicit ? 1 : 0),
                .optionalText(registration.deviceID),
                .optionalText(registration.publicKey), .integer(now.millis), .integer(room.perIdentity),
                .integer(room.accountHasRoom ? 1 : 0),
            ])
        guard let row = rows.first else { return nil }
        bindingCache.invalidate(accountID: registration.accountID)
        let binding = try Self.binding(row)
        return BindingUpsert(binding: binding, created: binding.id == newID)
    }

    public func bindingCount(accountID: String) async throws -> Int {
        let rows = try await query("SELECT COUNT(*) AS n FROM bindings WHERE account_id = ?", [.text(accountID)])
        return Int(rows.first?.column("n")?.integer ?? 0)
    }

    public func binding(id: String, accountID: String, identity: String?) async throws -> Binding? {
        var sql = "SELECT \(Self.bindingColumns) FROM bindings WHERE id = ? AND account_id = ?"
        var binds: [SQLiteData] = [.text(id), .text(accountID)]
        if let identity {
            sql += " AND identity = ?"
            binds.append(.text(identity))
        }
        return try await query(sql, binds).first.map(Self.binding)
    }

    public func listBindings(accountID: String, query bindingQuery: BindingQuery) async throws -> Page<Binding> {
        var sql = "SELECT \(Self.bindingColumns) FROM bindings WHERE account_id = ?"
        var binds: [SQLiteData] = [.text(accountID)]
        if let identity = bindingQuery.identity {
            sql += " AND identity = ?"
            binds.append(.text(identity))
        }
        if let type = bindingQuery.type {
            sql += " AND type = ?"
            binds.append(.text(type.rawValue))
        }
        if let status = bindingQuery.status {
            sql += " AND status = ?"
            binds.append(.text(status.rawValue))
        }
        if let after = bindingQuery.after {
            sql += " AND id > ?"
            binds.append(.text(after))
        }
        // One extra row tells whether another page exists without a COUNT.
        sql += " ORDER BY id LIMIT ?"
        binds.append(.integer(bindingQuery.limit + 1))
        var items = try await query(sql, binds).map(Self.binding)
        var next: String?
        if items.count > bindingQuery.limit {
            items.removeLast()
            next = items.last?.id
        }
        return Page(items: items, nextAfter: next)
    }

    public func activeBindings(accountID: String, identity: String) async throws -> [Binding] {
        let (cached, version) = bindingCache.lookup(accountID: accountID, identity: identity)
        if let cached { return cached }
        let bindings = try await query(
            "SELECT \(Self.bindingColumns) FROM bindings WHERE account_id = ? AND identity = ? AND status = 'active' ORDER BY id",
            [.text(accountID), .text(identity)]
        ).map(Self.binding)
        bindingCache.store(bindings, accountID: accountID, identity: identity, ifVersion: version)
        return bindings
    }

    public func deleteBinding(id: String, accountID: String, identity: String?) async throws -> Bool {
        var sql = "DELETE FROM bindings WHERE id = ? AND account_id = ?"
        var binds: [SQLiteData] = [.text(id), .text(accountID)]
        if let identity {
            sql += " AND identity = ?"
            binds.append(.text(identity))
        }
        let deleted = try await !query(sql + " RETURNING id", binds).isEmpty
        bindingCache.invalidate(accountID: accountID)
        return deleted
    }

    public func deleteBindings(accountID: String, identity: String) async throws -> Int {
        let deleted = try await query(
            "DELETE FROM bindings WHERE account_id = ? AND identity = ? RETURNING id", [.text(accountID), .text(identity)]
        ).count
        bindingCache.invalidate(accountID: accountID)
        return deleted
    }

    public func signOutDevices(accountID: String, identity: String, deviceIDs: [String]?, at date: Date) async throws {
        for deviceID in deviceIDs ?? [StoreSQL.everyDevice] {
            _ = try await query(
                """
                INSERT INTO signed_out_devices (account_id, identity, device_id, signed_out_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (account_id, identity, device_id) DO UPDATE SET signed_out_at = max(signed_out_at, excluded.signed_out_at)
                """, [.text(accountID), .text(identity), .text(deviceID), .integer(date.millis)])
        }
    }

    public func signedOut(accountID: String, identity: String, deviceID: String) async throws -> Date? {
        try await query(StoreSQL.lastSignOut, [.text(accountID), .text(identity), .text(deviceID)]).first?.optionalDate("at")
    }

    public func forgetSignOuts(before date: Date) async throws -> Int {
        try await query("DELETE FROM signed_out_devices WHERE signed_out_at < ? RETURNING account_id", [.integer(date.millis)]).count
    }

    public func invalidateBinding(id: String, accountID: String, reason: String, at date: Date, invalidSince: Date?) async throws -> Binding? {
        // One conditional statement: a re-registration that lands between Apple's answer and
        // this update wins, because it moves registered_at past the timestamp.
        var sql = """
            UPDATE bindings SET status = 'invalid', invalid_reason = ?, invalidated_at = ?, updated_at = ?
            WHERE id = ? AND account_id = ?
            """
        var binds: [SQLiteData] = [.text(reason), .integer(date.millis), .integer(date.millis), .text(id), .text(accountID)]
        if let invalidSince {
            sql += " AND registered_at <= ?"
            binds.append(.integer(invalidSince.millis))
        }
        let rows = try await query(sql + " RETURNING \(Self.bindingColumns)", binds)
        bindingCache.invalidate(accountID: accountID)
        if let row = rows.first {
            return try Self.binding(row)
        }
        return try await binding(id: id, accountID: accountID, identity: nil)
    }

    public func bindingCounts() async throws -> [BindingCount] {
        // Kept by triggers on every binding change (migration 5): a few rows, never a scan.
        try await query("SELECT type, status, n FROM binding_counts WHERE n > 0").compactMap { row in
            guard let type = BindingType(rawValue: row.string("type")),
                let status = BindingStatus(rawValue: row.string("status"))
            else { return nil }
            return BindingCount(type: type, status: status, count: Int(row.column("n")?.integer ?? 0))
        }
    }

    private static func binding(_ row: SQLiteResultRow) throws -> Binding {
        guard let type = BindingType(rawValue: row.string("type")),
            let status = BindingStatus(rawValue: row.string("status"))
        else {
            throw RingRelayError(.internal, code: .storeCorrupt, "A stored binding has an unknown type or status.")
        }
        return Binding(
            id: row.string("id"), accountID: row.string("account_id"), identity: row.string("identity"), type: type,
            token: row.string("token"), environment: row.optionalString("environment").flatMap(PushEnvironment.init),
            environmentIsExplicit: row.column("environment_explicit")?.integer == 1, deviceID: row.optionalString("device_id"), publicKey: row.optionalString("public_key"), status: status,
            invalidReason: row.optionalString("invalid_reason"), invalidatedAt: row.optionalDate("invalidated_at"),
            registeredAt: row.date("registered_at"), createdAt: row.date("created_at"), updatedAt: row.date("updated_at"))
    }
}

// MARK: - Credentials

extension SQLiteStore {
    public func putCredential(_ credential: Credential, accountID: String, at date: Date) async throws {
        let payload = String(decoding: try JSONEncoder().encode(credential), as: UTF8.self)
        _ = try await query(
            """
            INSERT INTO credentials (account_id, kind, payload, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (account_id, kind) DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at
            """,
            [.text(accountID), .text(credential.kind.rawValue), .text(payload), .integer(date.millis)])
    }

    public func credentials(accountID: String) async throws -> [StoredCredential] {
        try await query("SELECT payload, updated_at FROM credentials WHERE account_id = ? ORDER BY kind", [.text(accountID)])
            .map(Self.credential)
    }

    public func credential(kind: CredentialKind, accountID: String) async throws -> StoredCredential? {
        try await query(
            "SELECT payload, updated_at FROM credentials WHERE account_id = ? AND kind = ?",
            [.text(accountID), .text(kind.rawValue)]
        ).first.map(Self.credential)
    }

    public func deleteCredential(kind: CredentialKind, accountID: String) async throws -> Bool {
        try await !query(
            "DELETE FROM credentials WHERE account_id = ? AND kind = ? RETURNING kind", [.text(accountID), .text(kind.rawValue)]
        ).isEmpty
    }

    private static func credential(_ row: SQLiteResultRow) throws -> StoredCredential {
        let credential = try JSONDecoder().decode(Credential.self, from: Data(row.string("payload").utf8))
        return StoredCredential(credential: credential, updatedAt: row.date("updated_at"))
    }
}

// MARK: - Row helpers

extension SQLiteResultRow {
    fileprivate func string(_ name: String) -> String { column(name)?.string ?? "" }
    fileprivate func optionalString(_ name: String) -> String? {
        guard let data = column(name), !data.isNull else { return nil }
        return data.string
    }
    fileprivate func date(_ name: String) -> Date { Date(millis: column(name)?.integer ?? 0) }
    fileprivate func optionalDate(_ name: String) -> Date? {
        guard let data = column(name), !data.isNull, let value = data.integer else { return nil }
        return Date(millis: value)
    }
}

extension SQLiteData {
    fileprivate static func optionalText(_ value: String?) -> SQLiteData { value.map(SQLiteData.text) ?? .null }
    fileprivate static func optionalDate(_ value: Date?) -> SQLiteData { value.map { .integer($0.millis) } ?? .null }
}

// MARK: - Calls

extension SQLiteStore {
    fileprivate static let callColumns = StoreSQL.callColumns
    private static let deliveryColumns = StoreSQL.deliveryColumns
    /// Built once: the handle finds its prepared statement by this text on every call.
    private static let insertCallSQL = """
        INSERT INTO calls (\(callColumns)) VALUES (\(Array(repeating: "?", count: 25).joined(separator: ", ")))
        ON CONFLICT DO NOTHING
        -- ?2 is the account, ?5 the callee, as bound for the VALUES.
        RETURNING \(busy(account: "?2", identity: "?5")) AS busy
        """

    public func createCall(_ call: Call) async throws -> CallCreation {
        // Group commit: calls arriving while a round is written go in the next one, a transaction
        // of their own statements. Each commit writes the pages it changed once, so under load
        // the call indexes' pages are written once per round, not once per call (the history
        // indexes had made that a sixth of a webhook's CPU).
        try await callInserts.submit(call) { calls in try await self.insertCalls(calls) }
    }

    /// Inserts one round of calls: alone as a statement of its own, several in one transaction.
    /// One call's failure is its own; a failed commit fails the round.
    private func insertCalls(_ calls: [Call]) async throws -> [Result<CallCreation, any Error>] {
        try await locked { connection in
            guard calls.count > 1 else { return [Result { try self.insertCall(calls[0], on: connection) }] }
            _ = try connection.query("BEGIN IMMEDIATE")
            let results = calls.map { call in Result { try self.insertCall(call, on: connection) } }
            do {
                _ = try connection.query("COMMIT")
            } catch {
                _ = try? connection.query("ROLLBACK")
                // The cache may hold calls of the round that are not in the file.
                self.callCache.forgetAll()
                throw error
            }
            return results
        }
    }

    /// Inserts one call on the connection (the caller holds the mutex).
    private func insertCall(_ call: Call, on connection: SQLiteHandle) throws -> CallCreation {
        // INSERT … ON CONFLICT DO NOTHING, then read back: the unique index decides which of two
        // concurrent deliveries of one notification rings. The same statement tells whether the
        // callee is in an accepted call (as callee, or as the caller of a native one).
        let inserted = try connection.query(Self.insertCallSQL, Self.binds(call))
        if let row = inserted.first {
            var busy: Set<String> = row.column("busy")?.integer == 1 ? [call.callee] : []
            if let group = call.group {
                for (index, member) in group.members.enumerated() {
                    _ = try connection.query(
                        "INSERT INTO call_members (call_id, account_id, identity, created_at, first) VALUES (?, ?, ?, ?, ?)",
                        [.text(call.id), .text(call.accountID), .text(member.identity), .integer(call.createdAt.millis), .integer(index == 0 ? 1 : 0)])
                    guard index > 0 else { continue }
                    let check = try connection.query(
                        "SELECT \(Self.busy(account: "?1", identity: "?2")) AS busy", [.text(call.accountID), .text(member.identity)])
                    if check.first?.column("busy")?.integer == 1 { busy.insert(member.identity) }
                }
            }
            self.callCache.put(call)
            return .created(call, busy: busy)
        }
        // No provider notification to be a repeat of: the id was taken, and only a caller's own
        // choice (`callId`) can take one.
        guard let externalID = call.externalID else { throw StoreSQL.callIDTaken }
        guard
            let row = try connection.query(
                "SELECT \(Self.callColumns) FROM calls WHERE account_id = ? AND source = ? AND external_id = ?",
                [.text(call.accountID), .text(call.source.rawValue), .text(externalID)]
            ).first
        else {
            throw RingRelayError(.internal, code: .storeError, "The call could not be created.")
        }
        return .existing(try Self.call(row))
    }

    /// Whether `identity` is in an accepted call: as the callee of a call to one identity, as the
    /// caller of a native call, or in a ring group's call. The accepted-call indexes are named: the
    /// history indexes (migration 6) also start with the account and would otherwise be picked,
    /// reading every call the identity ever had.
    private static func busy(account: String, identity: String) -> String {
        """
        (
            EXISTS (
                SELECT 1 FROM calls AS other INDEXED BY calls_accepted_callee
                WHERE other.account_id = \(account) AND other.state = 'accepted' AND other.callee = \(identity) AND other.ring_mode IS NULL)
            OR EXISTS (
                SELECT 1 FROM calls AS other INDEXED BY calls_accepted_caller
                WHERE other.account_id = \(account) AND other.state = 'accepted' AND other.caller = \(identity) AND other.source = 'native')
            OR EXISTS (
                SELECT 1 FROM call_members INDEXED BY call_members_joined
                WHERE account_id = \(account) AND identity = \(identity) AND joined = 1)
        )
        """
    }

    /// A call's values in ``callColumns`` order.
    private static func binds(_ call: Call) -> [SQLiteData] {
        [
            .text(call.id), .text(call.accountID), .text(call.source.rawValue), .optionalText(call.caller), .text(call.callee),
            .text(call.state.rawValue), .optionalText(call.externalID), .integer(call.createdAt.millis),
            .integer(call.ringDeadline.millis), .integer(call.updatedAt.millis), .optionalText(call.callerName),
            .text(call.media.rawValue), .optionalText(call.metadata), .optionalDate(call.answeredAt), .optionalText(call.answeredBy),
            .optionalDate(call.endedAt), .optionalText(call.endReason?.rawValue), .optionalText(call.endedBy),
            .optionalText(call.callerAvatarURL), call.notifyMissed.map { .integer($0 ? 1 : 0) } ?? .null,
            .integer(call.isSealed ? 1 : 0), .optionalText(call.group?.mode.rawValue), .optionalText(call.group?.storedParticipants),
            .integer(call.group?.anyRinging == true ? 1 : 0), .integer(call.version),
        ]
    }

    public func call(id: String, accountID: String) async throws -> Call? {
        if let cached = callCache.call(id: id) { return cached.accountID == accountID ? cached : nil }
        return try await query("SELECT \(Self.callColumns) FROM calls WHERE id = ? AND account_id = ?", [.text(id), .text(accountID)])
            .first.map(Self.call)
    }

    public func listCalls(accountID: String, query history: CallHistoryQuery) async throws -> CallHistoryPage {
        let statements = HistoryStatements(accountID: accountID, query: history)
        return try await locked { connection in
            // Where the window of calls looked at ends: the newest of the parts' window ends, so
            // every part is read completely above it.
            var windowEnd: HistoryStatements.Bound?
            for (sql, binds) in statements.windows {
                guard let row = try connection.query(sql, binds).first else { continue }
                let end = HistoryStatements.Bound(millis: Int(row.column("created_at")?.integer ?? 0), id: row.string("id"))
                if windowEnd.map({ $0 < end }) ?? true { windowEnd = end }
            }
            let (sql, binds) = statements.page(after: windowEnd)
            var calls = try connection.query(sql, binds).map(Self.call)
            // One extra row tells whether another page exists without a COUNT.
            if calls.count > history.limit {
                calls.removeLast(calls.count - history.limit)
                return CallHistoryPage(calls: calls, next: calls.last.map(CallHistoryPosition.init(after:)))
            }
            return CallHistoryPage(calls: calls, next: windowEnd.map { CallHistoryPosition(createdAt: Date(millis: $0.millis), id: $0.id) })
        }
    }

    /// The query plans of ``listCalls(accountID:query:)`` for `query`, one list of steps per
    /// statement: the window statements' and the page's (from an arbitrary window end). Tests check
    /// that each reads an index range and never scans or sorts the table.
    package func callHistoryPlan(accountID: String, query history: CallHistoryQuery) async throws -> [[String]] {
        let statements = HistoryStatements(accountID: accountID, query: history)
        let windowEnd = statements.windows.isEmpty ? nil : HistoryStatements.Bound(millis: 0, id: "")
        var plans: [[String]] = []
        for (sql, binds) in statements.windows + [statements.page(after: windowEnd)] {
            plans.append(try await query("EXPLAIN QUERY PLAN " + sql, binds).map { $0.string("detail") })
        }
        return plans
    }

    /// The statements behind ``listCalls(accountID:query:)``.
    ///
    /// The page's statement reads one range of a history index (migration 6) per part, newest
    /// first, and stops after a page: the account's calls, the identity's incoming calls, its
    /// outgoing calls, or both of the latter merged (a call to oneself only once). The indexes are
    /// named, so a later index cannot silently turn a page into a scan.
    ///
    /// A `states` filter is checked row by row, and a rare state must not keep the connection (and
    /// every ring waiting for it) busy reading a week of calls. So each part first finds, from the
    /// index alone, where its window of ``window`` calls ends, and the page reads only above the
    /// newest of those ends; when it is not full, the next page starts there.
    ///
    /// The statements have few shapes whatever the filters (the connection keeps each distinct
    /// text prepared): the range is always bound, as two `(created_at, id)` bounds, and the states
    /// as a full list.
    struct HistoryStatements: Sendable {
        typealias Bound = CallHistoryBound

        /// One part: a range of one index, the equality terms it serves and their values, and a term
        /// only the page checks. Columns are named through aliases: `c` for calls, `m` for
        /// call_members.
        struct Part: Sendable {
            /// What the windows read: the index alone.
            var windowFrom: String
            /// What the page reads: the index, and the calls it leads to.
            var pageFrom: String
            /// The index's `(created_at, id)` columns.
            var key: String
            var condition: String
            var binds: [SQLiteData]
            var pageOnly = ""
            var pageOnlyBinds: [SQLiteData] = []

            /// A range of a history index of the calls table.
            static func calls(index: String, condition: String, binds: [SQLiteData]) -> Part {
                let from = "calls AS c INDEXED BY \(index)"
                return Part(windowFrom: from, pageFrom: from, key: "c.created_at, c.id", condition: condition, binds: binds)
            }

            /// The ring groups `identity` was rung by after their first identity (who is in
            /// calls_callee_history already).
            static func laterGroupMembers(accountID: String, identity: String) -> Part {
                let from = "call_members AS m INDEXED BY call_members_history"
                return Part(
                    windowFrom: from, pageFrom: from + " JOIN calls AS c ON c.id = m.call_id", key: "m.created_at, m.call_id",
                    condition: "m.account_id = ? AND m.identity = ? AND m.first = 0", binds: [.text(accountID), .text(identity)])
            }

            var range: String { " AND (\(key)) >= (?, ?) AND (\(key)) < (?, ?)" }
            var order: String { " ORDER BY " + key.split(separator: ",").map { "\($0.trimmingCharacters(in: .whitespaces)) DESC" }.joined(separator: ", ") }
        }

        /// Most calls a page with a `states` filter looks at, per part.
        static let window = 1000

        /// One statement per part finding where its window ends; none without a `states` filter.
        private(set) var windows: [(String, [SQLiteData])] = []
        private var parts: [Part]
        private var since: Bound
        private var upper: Bound
        private var stateFilter = ""
        private var stateBinds: [SQLiteData] = []
        private var limit: Int

        private static let order = " ORDER BY created_at DESC, id DESC"
        private static let selected = SQLiteStore.callColumns.split(separator: ",").map { "c." + $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .joined(separator: ", ")

        init(accountID: String, query history: CallHistoryQuery) {
            limit = history.limit
            // The tighter of `until` and the cursor; `(until, '')` comes before every call of that millisecond.
            upper = Bound(millis: Int.max, id: "")
            if let until = history.until { upper = Bound(millis: until.millis, id: "") }
            if let after = history.after { upper = min(upper, Bound(millis: after.createdAt.millis, id: after.id)) }
            since = Bound(millis: history.since?.millis ?? Int.min, id: "")
            if let identity = history.identity {
                let incoming = [
                    Part.calls(index: "calls_callee_history", condition: "c.account_id = ? AND c.callee = ?", binds: [.text(accountID), .text(identity)]),
                    Part.laterGroupMembers(accountID: accountID, identity: identity),
                ]
                var outgoing = Part.calls(
                    index: "calls_caller_history", condition: "c.account_id = ? AND c.caller = ? AND c.source = 'native'",
                    binds: [.text(accountID), .text(identity)])
                switch history.direction {
                case .incoming?: parts = incoming
                case .outgoing?: parts = [outgoing]
                case nil:
                    // A call to oneself comes once, as incoming.
                    outgoing.pageOnly = " AND c.callee <> ?"
                    outgoing.pageOnlyBinds = [.text(identity)]
                    parts = incoming + [outgoing]
                }
            } else {
                parts = [Part.calls(index: "calls_account_history", condition: "c.account_id = ?", binds: [.text(accountID)])]
            }
            let states = history.states.map(\.rawValue).sorted()
            if let first = states.first {
                // Padded with repeats to every state's count: one statement text for any selection.
                let padded = states + Array(repeating: first, count: CallState.allCases.count - states.count)
                stateFilter = " AND c.state IN (\(Array(repeating: "?", count: padded.count).joined(separator: ", ")))"
                stateBinds = padded.map(SQLiteData.text)
                windows = parts.map { part in
                    let columns = part.key.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                    return (
                        "SELECT \(columns[0]) AS created_at, \(columns[1]) AS id FROM \(part.windowFrom) WHERE \(part.condition)\(part.range)"
                            + "\(part.order) LIMIT 1 OFFSET ?",
                        part.binds + rangeBinds(from: since) + [.integer(Self.window - 1)]
                    )
                }
            }
        }

        private func rangeBinds(from lower: Bound) -> [SQLiteData] {
            [.integer(lower.millis), .text(lower.id), .integer(upper.millis), .text(upper.id)]
        }

        /// The page's statement, reading only calls at or above `windowEnd` when there is one.
        func page(after windowEnd: Bound?) -> (String, [SQLiteData]) {
            let lower = max(since, windowEnd ?? since)
            let fetch = SQLiteData.integer(limit + 1)
            let selects = parts.map { part in
                (
                    "SELECT \(Self.selected) FROM \(part.pageFrom) WHERE \(part.condition)\(part.pageOnly)\(part.range)"
                        + "\(stateFilter)\(part.order) LIMIT ?",
                    part.binds + part.pageOnlyBinds + rangeBinds(from: lower) + stateBinds + [fetch]
                )
            }
            guard selects.count > 1 else { return selects[0] }
            let merged = selects.map { "SELECT * FROM (\($0.0))" }.joined(separator: " UNION ALL ") + Self.order + " LIMIT ?"
            return (merged, selects.flatMap(\.1) + [fetch])
        }
    }

    /// How long delivery records wait before they are written. A ring's planned records and their
    /// answers (usually a millisecond or two later) then go out as one row each, and many rings
    /// share a statement and a commit; only a crash inside this window loses records.
    static let writeBehind: Duration = .milliseconds(20)

    public func recordDeliveries(_ deliveries: [Delivery]) {
        guard backlog.add(deliveries) else { return }
        // Records arriving until the write takes the connection go in the same statement.
        Task {
            try? await Task.sleep(for: Self.writeBehind)
            do {
                try await mutex.withLock { [connection] in
                    // A closed store wrote its backlog while closing.
                    guard !self.isClosed.withLock({ $0 }) else { return }
                    try self.writeBacklog(on: connection, endingSchedule: true)
                    self.checkpointIfDue()
                }
            } catch {
                // The next record schedules another write.
                backlog.endSchedule()
                logger.error("could not record deliveries", metadata: ["error.cause": .string("\(error)")])
            }
        }
    }

    public func flushDeliveries() async throws {
        // Group commit: the caller's records are in the backlog already; one write of the backlog
        // serves everyone waiting when it starts.
        try await deliveryFlushes.submit(()) { round in try await self.writeFlushRound(round) }
    }

    /// Writes the backlog for one round of ``flushDeliveries()`` callers.
    private func writeFlushRound(_ round: [Void]) async throws -> [Result<Void, any Error>] {
        // Through the mutex even when the backlog is empty: records another writer drained are
        // being written under it, and are committed once it is ours.
        try await locked { connection in try self.writeBacklog(on: connection) }
        return round.map { .success($0) }
    }

    public func deliveries(callID: String, after: String?, limit: Int) async throws -> [Delivery] {
        try await locked { connection in
            try self.writeBacklog(on: connection)
            return try connection.query(
                "SELECT \(Self.deliveryColumns) FROM deliveries WHERE call_id = ? AND id > ? ORDER BY id LIMIT ?",
                [.text(callID), .text(after ?? ""), .integer(limit)]
            ).map { row in
                Delivery(
                    id: row.string("id"), callID: row.string("call_id"), bindingID: row.optionalString("binding_id"),
                    deviceID: row.optionalString("device_id"), channel: PushChannel(rawValue: row.string("channel")) ?? .apns,
                    kind: row.string("kind"), outcome: row.string("outcome"), status: row.column("status")?.integer.map { Int($0) },
                    reason: row.optionalString("reason"), providerID: row.optionalString("provider_id"),
                    attempts: Int(row.column("attempts")?.integer ?? 0), latencyMs: row.column("latency_ms")?.double,
                    createdAt: row.date("created_at"), completedAt: row.optionalDate("completed_at"))
            }
        }
    }

    /// Writes the waiting delivery records, up to ``deliveryChunk`` per statement; the caller holds
    /// the mutex.
    ///
    /// More than one statement's worth is one transaction: the pages the statements share (the
    /// tables' and indexes' last leaves, the tree above them) go to the log once rather than once
    /// a statement, which for a 10,000-device ring's records was 50 commits where one does. A
    /// chunk the database refuses (its call was deleted meanwhile, say) is retried a row at a
    /// time, so one orphan does not lose its neighbours. A database that fails (full, an I/O
    /// error) keeps every record waiting and throws: whoever promised them on disk must not
    /// answer. (Records a failed write had already committed are written again later: a record
    /// replaces its delivery's row, so that is harmless.)
    private func writeBacklog(on connection: SQLiteHandle, endingSchedule: Bool = false) throws {
        let waiting = backlog.drain(endingSchedule: endingSchedule)
        guard !waiting.isEmpty else { return }
        let transaction = waiting.count > Self.deliveryChunk
        var lost = 0
        do {
            if transaction { _ = try connection.query("BEGIN IMMEDIATE") }
            var start = waiting.startIndex
            while start < waiting.endIndex {
                let chunk = waiting[start..<min(start + Self.deliveryChunk, waiting.endIndex)]
                do {
                    try Self.upsert(chunk, on: connection)
                } catch let error as SQLiteStatementError where error.isConstraint {
                    // A failed statement is undone on its own; the transaction goes on.
                    for delivery in chunk {
                        do {
                            try Self.upsert([delivery], on: connection)
                        } catch let error as SQLiteStatementError where error.isConstraint {
                            lost += 1
                        }
                    }
                }
                start = chunk.endIndex
            }
            if transaction { _ = try connection.query("COMMIT") }
        } catch {
            if transaction { _ = try? connection.query("ROLLBACK") }
            backlog.restore(waiting)
            throw Self.deliveryWriteFailed(error)
        }
        if lost > 0 {
            logger.warning("delivery records refused; their calls are gone", metadata: ["deliveries.lost": .stringConvertible(lost)])
        }
    }

    /// Delivery records written per statement.
    private static let deliveryChunk = 200

    /// The error of delivery records the database could not take (503: they wait for the next write).
    private static func deliveryWriteFailed(_ cause: any Error) -> RingRelayError {
        RingRelayError(.unavailable, code: .storeUnavailable, "The database could not record deliveries; retry shortly.", underlying: cause)
    }

    private static func upsert(_ deliveries: some Collection<Delivery>, on connection: SQLiteHandle) throws {
        let row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        _ = try connection.query(
            "INSERT INTO deliveries (\(deliveryColumns)) VALUES " + Array(repeating: row, count: deliveries.count).joined(separator: ", ")
                + " " + StoreSQL.deliveryUpsert,
            deliveries.flatMap(deliveryBinds))
    }

    public func setCallState(id: String, accountID: String, state: CallState, at date: Date) async throws {
        try await locked { connection in
            _ = try connection.query(
                "UPDATE calls SET state = ?, updated_at = ?, members_ringing = 0, version = version + 1 WHERE id = ? AND account_id = ?",
                [.text(state.rawValue), .integer(date.millis), .text(id), .text(accountID)])
            self.callCache.forget(id: id)
        }
    }

    public func transitionCall(_ change: CallChange) async throws -> Call? {
        let statement = Self.transition(change)
        return try await locked { connection in try self.apply(statement, to: change.id, on: connection) }
    }

    public func transitionCalls(_ changes: [CallChange]) async throws -> [Call?] {
        guard changes.count > 1 else { return changes.isEmpty ? [] : [try await transitionCall(changes[0])] }
        let statements = changes.map { (Self.transition($0), $0.id) }
        do {
            return try await transaction { connection in
                try statements.map { statement, id in try self.apply(statement, to: id, on: connection) }
            }
        } catch {
            // Rolled back: the cache may hold changes that are not in the file.
            for change in changes { callCache.forget(id: change.id) }
            throw error
        }
    }

    /// The conditional update of `change`. One statement: the WHERE clause is the rule, so two
    /// devices accepting at once cannot both win.
    private static func transition(_ change: CallChange) -> (sql: String, binds: [SQLiteData]) {
        let states = change.from.map(\.rawValue).sorted()
        var sql = """
            UPDATE calls SET state = ?, updated_at = ?, version = version + 1,
                answered_at = CASE WHEN ? = 'accepted' THEN ? ELSE answered_at END,
                answered_by = CASE WHEN ? = 'accepted' THEN ? ELSE answered_by END,
                ended_at = COALESCE(?, ended_at), end_reason = COALESCE(?, end_reason), ended_by = COALESCE(?, ended_by)
            WHERE id = ? AND account_id = ? AND state IN (\(Array(repeating: "?", count: states.count).joined(separator: ", ")))
            """
        let final = change.endReason != nil
        var binds: [SQLiteData] = [
            .text(change.to.rawValue), .integer(change.at.millis),
            .text(change.to.rawValue), .integer(change.at.millis),
            .text(change.to.rawValue), .optionalText(change.answeredBy),
            final ? .integer(change.at.millis) : .null, .optionalText(change.endReason?.rawValue), .optionalText(change.endedBy),
            .text(change.id), .text(change.accountID),
        ]
        binds += states.map(SQLiteData.text)
        if change.beforeDeadline {
            sql += " AND ring_deadline > ?"
            binds.append(.integer(change.at.millis))
        }
        sql += " RETURNING \(Self.callColumns)"
        return (sql, binds)
    }

    /// Runs a ``transition(_:)`` statement of call `id` and keeps the cache in step; the caller
    /// holds the mutex.
    private func apply(_ statement: (sql: String, binds: [SQLiteData]), to id: String, on connection: SQLiteHandle) throws -> Call? {
        guard let row = try connection.query(statement.sql, statement.binds).first else {
            // Something else changed the call first; what, only the file knows.
            callCache.forget(id: id)
            return nil
        }
        let changed = try Self.call(row)
        callCache.put(changed)
        return changed
    }

    public func updateCall(_ updated: Call, expectedVersion: Int) async throws -> Call? {
        let joined = updated.group?.joined.map { SQLiteData.text($0.identity) } ?? []
        let membersSQL =
            joined.isEmpty
            ? "UPDATE call_members SET joined = 0 WHERE call_id = ? AND joined = 1"
            : "UPDATE call_members SET joined = (identity IN (\(Array(repeating: "?", count: joined.count).joined(separator: ", ")))) WHERE call_id = ?"
        return try await locked { connection in
            _ = try connection.query("BEGIN IMMEDIATE")
            do {
                let rows = try connection.query(
                    """
                    UPDATE calls SET state = ?, updated_at = ?, answered_at = ?, answered_by = ?, ended_at = ?, end_reason = ?, ended_by = ?,
                        participants = ?, members_ringing = ?, version = version + 1
                    WHERE id = ? AND account_id = ? AND version = ?
                    RETURNING \(Self.callColumns)
                    """,
                    [
                        .text(updated.state.rawValue), .integer(updated.updatedAt.millis), .optionalDate(updated.answeredAt),
                        .optionalText(updated.answeredBy), .optionalDate(updated.endedAt), .optionalText(updated.endReason?.rawValue),
                        .optionalText(updated.endedBy), .optionalText(updated.group?.storedParticipants),
                        .integer(updated.group?.anyRinging == true ? 1 : 0), .text(updated.id), .text(updated.accountID), .integer(expectedVersion),
                    ])
                guard let row = rows.first else {
                    _ = try connection.query("ROLLBACK")
                    self.callCache.forget(id: updated.id)
                    return nil
                }
                _ = try connection.query(membersSQL, joined + [.text(updated.id)])
                _ = try connection.query("COMMIT")
                let stored = try Self.call(row)
                self.callCache.put(stored)
                return stored
            } catch {
                _ = try? connection.query("ROLLBACK")
                self.callCache.forget(id: updated.id)
                throw error
            }
        }
    }

    public func expiredRingingCalls(before date: Date, limit: Int) async throws -> [Call] {
        try await query(
            """
            SELECT * FROM (SELECT \(Self.callColumns) FROM calls WHERE state = 'ringing' AND ring_deadline <= ?1)
            UNION ALL
            SELECT * FROM (SELECT \(Self.callColumns) FROM calls WHERE state = 'accepted' AND members_ringing = 1 AND ring_deadline <= ?1)
            ORDER BY ring_deadline LIMIT ?2
            """,
            [.integer(date.millis), .integer(limit)]
        ).map(Self.call)
    }

    /// In transactions of 10: the file has one writer, and new calls wait behind each (at 1,000
    /// calls a second, a commit per call was as many commits again as the calls' own; 50 at once
    /// held an event loop for milliseconds). Between two, the thread is given back: SQLite runs
    /// on the calling task's event loop, whose connections would otherwise wait for the whole sweep.
    public func endUnansweredCalls(at date: Date, limit: Int) async throws -> [Call] {
        let due = try await query(
            "SELECT \(Self.callColumns) FROM calls WHERE state = 'ringing' AND participants IS NULL AND ring_deadline <= ?1 ORDER BY ring_deadline LIMIT ?2",
            [.integer(date.millis), .integer(limit)]
        ).map(Self.call)
        var ended: [Call] = []
        let batchSize = 10
        for start in stride(from: 0, to: due.count, by: batchSize) {
            if start > 0 { await Task.yield() }
            let batch = due[start..<min(start + batchSize, due.count)].map { CallRules.timeout($0, at: date) }
            ended += try await transitionCalls(batch).compactMap { $0 }
        }
        return ended
    }

    public func pruneCalls(createdBefore date: Date, notificationsCreatedBefore notifications: Date) async throws -> Int {
        try await locked { connection in
            // A day's calls can be many rows: deleted on the thread pool.
            let pruned = try await connection.offloaded {
                try $0.query(
                    "DELETE FROM calls WHERE created_at < ? AND (external_id IS NULL OR created_at < ?) RETURNING id",
                    [.integer(date.millis), .integer(min(date, notifications).millis)])
            }
            // Provider calls kept for their notification id keep nothing else past the retention.
            let cutoff: [SQLiteData] = [.integer(date.millis)]
            _ = try connection.query(StoreSQL.forgetRetainedNotificationDeliveries, cutoff)
            let redacted = try connection.query(StoreSQL.redactRetainedNotifications, cutoff)
            for row in pruned + redacted { self.callCache.forget(id: row.string("id")) }
            return pruned.count
        }
    }

    private static func deliveryBinds(_ delivery: Delivery) -> [SQLiteData] {
        [
            .text(delivery.id), .text(delivery.callID), .optionalText(delivery.bindingID), .optionalText(delivery.deviceID),
            .text(delivery.channel.rawValue), .text(delivery.kind), .text(delivery.outcome), delivery.status.map { .integer($0) } ?? .null,
            .optionalText(delivery.reason), .optionalText(delivery.providerID), .integer(delivery.attempts),
            delivery.latencyMs.map { .float($0) } ?? .null, .integer(delivery.createdAt.millis), .optionalDate(delivery.completedAt),
        ]
    }

    private static func call(_ row: SQLiteResultRow) throws -> Call {
        guard let source = CallSource(rawValue: row.string("source")), let state = CallState(rawValue: row.string("state")),
            let media = CallMedia(rawValue: row.string("media"))
        else {
            throw RingRelayError(.internal, code: .storeCorrupt, "A stored call has an unknown source, state or media.")
        }
        return Call(
            id: row.string("id"), accountID: row.string("account_id"), source: source, caller: row.optionalString("caller"),
            callerName: row.optionalString("caller_name"), callerAvatarURL: row.optionalString("caller_avatar_url"),
            callee: row.string("callee"), media: media,
            metadata: row.optionalString("metadata"), state: state, externalID: row.optionalString("external_id"),
            createdAt: row.date("created_at"), ringDeadline: row.date("ring_deadline"), updatedAt: row.date("updated_at"),
            answeredAt: row.optionalDate("answered_at"), answeredBy: row.optionalString("answered_by"), endedAt: row.optionalDate("ended_at"),
            endReason: row.optionalString("end_reason").flatMap(CallEndReason.init(rawValue:)), endedBy: row.optionalString("ended_by"),
            notifyMissed: row.column("notify_missed")?.integer.map { $0 == 1 }, isSealed: row.column("sealed")?.integer == 1,
            group: try row.optionalString("ring_mode").map { mode in
                guard let mode = RingMode(rawValue: mode) else {
                    throw RingRelayError(.internal, code: .storeCorrupt, "A stored ring group has an unknown mode.")
                }
                return try RingGroup(mode: mode, storedParticipants: row.optionalString("participants") ?? "[]")
            },
            version: Int(row.column("version")?.integer ?? 0))
    }
}
