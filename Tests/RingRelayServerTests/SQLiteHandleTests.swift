import Foundation
import NIOCore
@testable import RingRelayStore
import RingRelayTesting
import SQLiteNIO
import Testing

/// The store's SQLite handle: a statement prepared once answers every later use with its own binds.
@Suite struct SQLiteHandleTests {
    private func withHandle(_ body: (SQLiteHandle) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let handle = try await SQLiteHandle.open(path: directory.appending("handle.sqlite"))
        do {
            try await body(handle)
        } catch {
            try await handle.close()
            throw error
        }
        try await handle.close()
    }

    @Test func reusedStatementsTakeEachUsesBindsAndEveryValueRoundTrips() async throws {
        try await withHandle { db in
            _ = try db.query("CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT, b BLOB, n TEXT)")
            let insert = "INSERT INTO t (id, i, f, s, b, n) VALUES (?, ?, ?, ?, ?, ?) RETURNING id"
            let values: [[SQLiteData]] = [
                [.integer(1), .integer(Int.max), .float(-0.25), .text("a\u{0}b é😀"), .blob(ByteBuffer(bytes: [0, 1, 255])), .null],
                [.integer(2), .integer(-1), .float(1e300), .text(""), .blob(ByteBuffer()), .text("not null")],
                [.integer(3), .null, .null, .null, .null, .null],
            ]
            for row in values {
                let returned = try db.query(insert, row)
                #expect(returned.map { $0.column("id") } == [row[0]])
            }
            let select = "SELECT id, i, f, s, b, n FROM t WHERE id = ?"
            for row in values {
                let read = try #require(try db.query(select, [row[0]]).first)
                let columns = ["id", "i", "f", "s", "b", "n"].map { read.column($0) }
                // An empty blob reads back as an empty blob, not as NULL.
                #expect(columns == row)
            }
            #expect(try db.query(select, [.integer(99)]).isEmpty)
            #expect(try db.query(select, [.integer(1)]).first?.column("nope") == nil)
        }
    }

    @Test func aFailedStepLeavesTheStatementReusableAndNamesTheConstraint() async throws {
        try await withHandle { db in
            _ = try db.query("CREATE TABLE u (name TEXT UNIQUE NOT NULL)")
            let insert = "INSERT INTO u (name) VALUES (?)"
            _ = try db.query(insert, [.text("acme")])
            do {
                _ = try db.query(insert, [.text("acme")])
                Issue.record("a duplicate name was inserted")
            } catch let error as SQLiteStatementError {
                #expect(error.isConstraint)
                #expect(error.message.contains("UNIQUE"))
            }
            // The same statement, reset after its failure, still works.
            _ = try db.query(insert, [.text("globex")])
            #expect(try db.query("SELECT COUNT(*) AS n FROM u").first?.column("n") == .integer(2))
            #expect(throws: SQLiteStatementError.self) { try db.query("SELEC nonsense") }
        }
    }

    @Test func aClosedHandleRefusesWork() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let db = try await SQLiteHandle.open(path: directory.appending("closed.sqlite"))
        _ = try db.query("SELECT 1")
        try await db.close()
        #expect(throws: SQLiteStatementError.self) { try db.query("SELECT 1") }
        try await db.close()
    }
}
