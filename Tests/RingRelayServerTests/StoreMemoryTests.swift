import Foundation
import Logging
import RingRelayCore
import RingRelayStore
import RingRelayTesting
import Testing
import RingRelayWire

/// What the SQLite store does with its file beside answering (the answers themselves, memory
/// included, are checked on both engines in StoreConformanceTests).
@Suite struct StoreMemoryTests {
    private struct Opened {
        let directory: TemporaryDirectory
        let store: SQLiteStore
        let account: Account
        var path: String { directory.appending("ringrelay.sqlite") }
    }

    private func open() async throws -> Opened {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteStore.open(path: directory.appending("ringrelay.sqlite"), logger: TestLogging.logger("test"))
        let account = Account(id: ResourceID.make(ResourceID.account), name: "acme", createdAt: Date())
        try await store.createAccount(
            account, firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h", hint: "h", createdAt: Date()))
        return Opened(directory: directory, store: store, account: account)
    }

    /// Statements run where they are called and SQLite's automatic checkpoint is off, so the store
    /// copies the write-ahead log into the file itself once it is long: many small commits leave a
    /// log of about the threshold, not one that grows with every write.
    @Test func theWriteAheadLogIsCheckpointedOnceItIsLong() async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let store = opened.store
        let walPath = opened.path + "-wal"
        @Sendable func walBytes() throws -> Int { try FileManager.default.attributesOfItem(atPath: walPath)[.size] as? Int ?? 0 }
        // Each commit adds at least two pages to the log (the row and the primary-key index).
        let commits = 4 * SQLiteStore.checkpointFrames
        for index in 0..<commits {
            _ = try await store.setting(named: "wal-\(index)", orInsert: { Data(repeating: 7, count: 64) })
            if index % 500 == 499 { await Task.yield() }
        }
        // Without checkpoints the log would hold every page written: 8,000 and more, over 32 MB.
        let limit = 3 * SQLiteStore.checkpointFrames * 4096
        // A checkpoint starved by a loaded machine lets the log grow past it for a while; once the
        // log starts over (at the next commit after a complete checkpoint) its file is cut back.
        #expect(
            await eventually {
                _ = try? await store.setting(named: "wal-extra-\(UUID().uuidString)", orInsert: { Data([1]) })
                return ((try? walBytes()) ?? .max) < limit
            }, "the log is \((try? walBytes()) ?? -1) bytes")
        // Nothing was lost on the way.
        #expect(try await store.setting(named: "wal-0", orInsert: { Data() }) == Data(repeating: 7, count: 64))
        #expect(try await store.setting(named: "wal-\(commits - 1)", orInsert: { Data() }) == Data(repeating: 7, count: 64))
        try await store.close()
    }
}
