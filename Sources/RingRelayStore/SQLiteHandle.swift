import Foundation
import NIOCore
import NIOPosix
import SQLiteNIO
// sqlite-nio's own SQLite build, whose C API its product does not re-export; see SQLiteHandle.
import VaporCSQLite

/// One SQLite connection that keeps its prepared statements.
///
/// sqlite-nio prepares every statement anew, and parsing the same few statements (the call
/// insert, the conditional state changes, the delivery upsert) was about a tenth of the server's
/// CPU on a ring. This handle uses the same SQLite library (sqlite-nio's vendored build, through
/// its C module) and keeps each distinct statement prepared for the life of the connection.
///
/// Statements run on the caller's thread: in WAL mode with `synchronous = NORMAL` a commit only
/// appends to the log in the OS's page cache, a few tens of microseconds, cheaper than the two
/// thread hops of handing it to a pool. What can take long runs on NIO's blocking-I/O thread pool
/// through ``offloaded(_:)``: opening, closing, bulk deletes and the WAL checkpoint, the one step
/// that waits for the disk. Automatic checkpoints are therefore off; the WAL hook counts the log's
/// frames (``walFrames``) so the owner can checkpoint off the hot path.
///
/// It is not safe for concurrent use: ``SQLiteStore`` serializes every call under its mutex.
final class SQLiteHandle: @unchecked Sendable {
    private var database: OpaquePointer?
    private var statements: [String: Prepared] = [:]
    private let pool: NIOThreadPool
    /// Frames in the write-ahead log after the last commit, as the WAL hook reported them.
    private(set) var walFrames = 0

    /// Most statements kept; the delivery upsert has one text per batch size, up to 200.
    private static let statementLimit = 512

    private final class Prepared {
        let statement: OpaquePointer
        let columns: SQLiteColumns

        init(statement: OpaquePointer) {
            self.statement = statement
            let count = sqlite_nio_sqlite3_column_count(statement)
            var names: [String: Int] = [:]
            for index in 0..<count {
                let name = String(cString: sqlite_nio_sqlite3_column_name(statement, index))
                if names[name] == nil { names[name] = Int(index) }
            }
            columns = SQLiteColumns(indices: names)
        }
    }

    private init(database: OpaquePointer, pool: NIOThreadPool) {
        self.database = database
        self.pool = pool
    }

    deinit {
        // ``close()`` is the way out; this only keeps a forgotten handle from leaking.
        finalizeStatements()
        if let database { sqlite_nio_sqlite3_close_v2(database) }
    }

    /// Opens (creating if needed) the database file at `path`; `readOnly` opens an existing one
    /// for reading only.
    static func open(path: String, readOnly: Bool = false, pool: NIOThreadPool = .singleton) async throws -> SQLiteHandle {
        try await pool.runIfActive {
            var database: OpaquePointer?
            let access = readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_CREATE | SQLITE_OPEN_READWRITE
            let flags = access | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
            let status = sqlite_nio_sqlite3_open_v2(path, &database, flags, nil)
            guard status == SQLITE_OK, let database else {
                let message = database.map { String(cString: sqlite_nio_sqlite3_errmsg($0)) } ?? "out of memory"
                if let database { sqlite_nio_sqlite3_close_v2(database) }
                throw SQLiteStatementError(code: status, message: message)
            }
            let handle = SQLiteHandle(database: database, pool: pool)
            // Replaces SQLite's own automatic checkpoint, which would run inside a commit.
            sqlite_nio_sqlite3_wal_hook(database, walHook, Unmanaged.passUnretained(handle).toOpaque())
            return handle
        }
    }

    /// Runs `work` on NIO's blocking-I/O thread pool, for statements that may wait for the disk
    /// or touch many rows.
    func offloaded<T: Sendable>(_ work: @escaping @Sendable (SQLiteHandle) throws -> T) async throws -> T {
        try await pool.runIfActive { try work(self) }
    }

    /// Copies the write-ahead log into the database file, on the thread pool, without waiting for
    /// other connections' statements. When no commit happens meanwhile, the copy is complete and
    /// the next commit starts the log over.
    ///
    /// - Returns: the frames in the log and how many of them are now in the file.
    @discardableResult
    func checkpoint() async throws -> (frames: Int, copied: Int) {
        let row = try await offloaded { try $0.query("PRAGMA wal_checkpoint(PASSIVE)") }.first
        return (Int(row?.column("log")?.integer ?? 0), Int(row?.column("checkpointed")?.integer ?? 0))
    }

    /// Writes what the database file and its log hold to disk (on the thread pool), so that a
    /// checkpoint finished right after has little left to wait for.
    func syncFiles() async throws {
        try await offloaded { handle in
            guard let database = handle.database, let name = sqlite_nio_sqlite3_db_filename(database, "main") else { return }
            let path = String(cString: name)
            for file in [path, path + "-wal"] {
                // fsync on any descriptor of a file writes all of its dirty pages.
                guard let opened = FileHandle(forReadingAtPath: file) else { continue }
                try? opened.synchronize()
                try? opened.close()
            }
        }
    }

    /// Copies the database into `destination`, a new empty file, with SQLite's online backup API.
    ///
    /// One step copies every page inside one read transaction: a consistent state, however busy
    /// the writers (a server in another process) are; in WAL mode they keep writing meanwhile.
    /// (Copying a few pages a step would let each write restart the copy, which might never end.)
    func backup(into destination: String) async throws {
        try await offloaded { handle in
            guard let source = handle.database else { throw SQLiteStatementError(code: SQLITE_MISUSE, message: "the database is closed") }
            var target: OpaquePointer?
            let opened = sqlite_nio_sqlite3_open_v2(destination, &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, nil)
            defer { if let target { sqlite_nio_sqlite3_close_v2(target) } }
            guard opened == SQLITE_OK, let target else { throw SQLiteStatementError(code: opened, message: "cannot open \(destination)") }
            guard let backup = sqlite_nio_sqlite3_backup_init(target, "main", source, "main") else {
                throw handle.error(sqlite_nio_sqlite3_errcode(target), on: target)
            }
            var step: Int32
            repeat {
                step = sqlite_nio_sqlite3_backup_step(backup, -1)
                // Another connection is checkpointing or holds a lock for a moment: wait and go on.
                if step == SQLITE_BUSY || step == SQLITE_LOCKED { usleep(10_000) }
            } while step == SQLITE_OK || step == SQLITE_BUSY || step == SQLITE_LOCKED
            let finished = sqlite_nio_sqlite3_backup_finish(backup)
            guard step == SQLITE_DONE, finished == SQLITE_OK else { throw handle.error(finished == SQLITE_OK ? step : finished, on: target) }
        }
    }

    /// Forgets the log's size once another connection has checkpointed it completely; the next
    /// commit reports the size again.
    func forgetWALFrames() {
        walFrames = 0
    }

    /// Drops the prepared statements, whose result columns a schema change may have changed.
    func forgetStatements() {
        finalizeStatements()
    }

    /// Finalizes the statements and closes the file. Later queries fail.
    func close() async throws {
        try await pool.runIfActive {
            self.finalizeStatements()
            if let database = self.database {
                let status = sqlite_nio_sqlite3_close_v2(database)
                self.database = nil
                guard status == SQLITE_OK else { throw SQLiteStatementError(code: status, message: "cannot close the database") }
            }
        }
    }

    private func finalizeStatements() {
        for prepared in statements.values { sqlite_nio_sqlite3_finalize(prepared.statement) }
        statements = [:]
    }

    /// Runs one statement on the calling thread and returns its rows.
    func query(_ sql: String, _ binds: [SQLiteData] = []) throws -> [SQLiteResultRow] {
        guard let database else { throw SQLiteStatementError(code: SQLITE_MISUSE, message: "the database is closed") }
        let prepared = try prepare(sql, on: database)
        let statement = prepared.statement
        defer {
            sqlite_nio_sqlite3_reset(statement)
            sqlite_nio_sqlite3_clear_bindings(statement)
        }
        for (offset, value) in binds.enumerated() {
            let status = bind(value, at: Int32(offset + 1), to: statement)
            guard status == SQLITE_OK else { throw error(status, on: database) }
        }
        var rows: [SQLiteResultRow] = []
        let count = sqlite_nio_sqlite3_column_count(statement)
        while true {
            let status = sqlite_nio_sqlite3_step(statement)
            if status == SQLITE_DONE { return rows }
            guard status == SQLITE_ROW else { throw error(status, on: database) }
            var values: [SQLiteData] = []
            values.reserveCapacity(Int(count))
            for index in 0..<count { values.append(Self.value(at: index, of: statement)) }
            rows.append(SQLiteResultRow(columns: prepared.columns, values: values))
        }
    }

    private func prepare(_ sql: String, on database: OpaquePointer) throws -> Prepared {
        if let prepared = statements[sql] { return prepared }
        var statement: OpaquePointer?
        let status = sqlite_nio_sqlite3_prepare_v3(database, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw error(status, on: database) }
        if statements.count >= Self.statementLimit, let evicted = statements.first {
            sqlite_nio_sqlite3_finalize(evicted.value.statement)
            statements[evicted.key] = nil
        }
        let prepared = Prepared(statement: statement)
        statements[sql] = prepared
        return prepared
    }

    private func bind(_ value: SQLiteData, at index: Int32, to statement: OpaquePointer) -> Int32 {
        switch value {
        case .integer(let integer): return sqlite_nio_sqlite3_bind_int64(statement, index, Int64(integer))
        case .float(let double): return sqlite_nio_sqlite3_bind_double(statement, index, double)
        case .text(let text):
            return text.withCString { sqlite_nio_sqlite3_bind_text64(statement, index, $0, UInt64(text.utf8.count), Self.transient, UInt8(SQLITE_UTF8)) }
        case .blob(let buffer):
            return buffer.withUnsafeReadableBytes { bytes in
                guard let base = bytes.baseAddress else { return sqlite_nio_sqlite3_bind_zeroblob(statement, index, 0) }
                return sqlite_nio_sqlite3_bind_blob64(statement, index, base, UInt64(bytes.count), Self.transient)
            }
        case .null: return sqlite_nio_sqlite3_bind_null(statement, index)
        }
    }

    private static func value(at index: Int32, of statement: OpaquePointer) -> SQLiteData {
        switch sqlite_nio_sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: return .integer(Int(sqlite_nio_sqlite3_column_int64(statement, index)))
        case SQLITE_FLOAT: return .float(sqlite_nio_sqlite3_column_double(statement, index))
        case SQLITE_TEXT:
            guard let text = sqlite_nio_sqlite3_column_text(statement, index) else { return .text("") }
            let count = Int(sqlite_nio_sqlite3_column_bytes(statement, index))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite_nio_sqlite3_column_bytes(statement, index))
            guard let blob = sqlite_nio_sqlite3_column_blob(statement, index), count > 0 else { return .blob(ByteBuffer()) }
            return .blob(ByteBuffer(bytes: UnsafeRawBufferPointer(start: blob, count: count)))
        default: return .null
        }
    }

    private func error(_ status: Int32, on database: OpaquePointer) -> SQLiteStatementError {
        SQLiteStatementError(code: status, message: String(cString: sqlite_nio_sqlite3_errmsg(database)))
    }

    /// SQLite's `SQLITE_TRANSIENT`: copy the bound bytes now.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// Records the log's size after each commit; checkpoints are the owner's to schedule.
private let walHook: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32 = {
    context, _, _, frames in
    if let context { Unmanaged<SQLiteHandle>.fromOpaque(context).takeUnretainedValue().noteWAL(frames: Int(frames)) }
    return SQLITE_OK
}

extension SQLiteHandle {
    fileprivate func noteWAL(frames: Int) { walFrames = frames }
}

/// A failed SQLite call: its (extended) result code and SQLite's message.
struct SQLiteStatementError: Error, CustomStringConvertible {
    var code: Int32
    var message: String

    /// A `UNIQUE`, `PRIMARY KEY`, `CHECK` or foreign-key constraint refused the change.
    var isConstraint: Bool { code & 0xFF == SQLITE_CONSTRAINT }

    var description: String { "SQLite error \(code): \(message)" }
}

/// Column names of a statement's result, shared by all its rows.
final class SQLiteColumns: Sendable {
    let indices: [String: Int]

    init(indices: [String: Int]) {
        self.indices = indices
    }
}

/// One result row.
struct SQLiteResultRow: Sendable {
    let columns: SQLiteColumns
    let values: [SQLiteData]

    /// The value of the named column, `nil` when the statement has no such column.
    func column(_ name: String) -> SQLiteData? {
        columns.indices[name].map { values[$0] }
    }
}
