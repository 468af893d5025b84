import Foundation
import Logging
import RingRelayCore
@testable import RingRelayStore
import RingRelayTesting
import Testing
import RingRelayWire

/// What only the SQLite store does.
@Suite struct StoreTests {
    /// A new store at `path` with the account `acme` (one key).
    private static func storeWithAccount(at path: String) async throws -> (SQLiteStore, Account) {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let account = Account(id: ResourceID.make(ResourceID.account, at: now), name: "acme", createdAt: now)
        let store = try await SQLiteStore.open(path: path, logger: TestLogging.logger("test"))
        try await store.createAccount(
            account, firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h", hint: "abcd", createdAt: now))
        return (store, account)
    }

    /// A backup is a consistent, private copy, made with the source open. (What both engines
    /// share is in StoreConformanceTests.)
    @Test func backupsCopyEverythingPrivately() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("ringrelay.sqlite")
        let (store, account) = try await Self.storeWithAccount(at: path)
        // Copied while the store is open and has just written (the server runs meanwhile).
        try await SQLiteStore.backup(databaseAt: path, to: directory.appending("copy.sqlite"))
        let mode = try FileManager.default.attributesOfItem(atPath: directory.appending("copy.sqlite"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        await #expect(throws: RingRelayError.self) { try await SQLiteStore.backup(databaseAt: path, to: directory.appending("copy.sqlite")) }
        try await store.close()

        let copy = try await SQLiteStore.open(path: directory.appending("copy.sqlite"), logger: TestLogging.logger("test"))
        #expect(try await copy.listAccounts() == [account])
        #expect(try await copy.schemaVersion() == Migration.sqlite.last?.version)
        try await copy.close()
    }

    /// A backup only reads: a database from a newer RingRelay (one this version would refuse to
    /// migrate) is copied as it is, and the source keeps its schema and has no migration applied.
    @Test func aBackupNeverMigratesTheDatabaseItCopies() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("ringrelay.sqlite")
        let store = try await SQLiteStore.open(path: path, logger: TestLogging.logger("test"))
        let current = try await store.schemaVersion()
        try await store.markSchemaVersionForTesting(current + 5)
        try await SQLiteStore.backup(databaseAt: path, to: directory.appending("copy.sqlite"))
        #expect(try await store.schemaVersion() == current + 5)
        try await store.close()
        // The copy is the newer database, refused like the original.
        await #expect(throws: RingRelayError.self) { try await SQLiteStore.open(path: directory.appending("copy.sqlite"), logger: TestLogging.logger("test")) }
        // A file that is not there is an error, and leaves no empty copy behind.
        await #expect(throws: RingRelayError.self) {
            try await SQLiteStore.backup(databaseAt: directory.appending("missing.sqlite"), to: directory.appending("other.sqlite"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory.appending("other.sqlite")))
    }

    /// `/metrics` reads counters the store keeps, never the bindings themselves (a `GROUP BY` over
    /// every binding, under the store's lock, on every scrape): a counter changed behind the
    /// store's back is what it reports.
    @Test func bindingCountsAreReadFromTheKeptCounters() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("ringrelay.sqlite")
        let (store, account) = try await Self.storeWithAccount(at: path)
        for token in ["t1", "t2", "t3"] {
            let registration = try BindingRegistration(
                accountID: account.id, identity: "bob", type: .fcm, token: token, environment: nil, deviceID: nil, publicKey: nil)
            _ = try await store.upsertBinding(registration, newID: ResourceID.make(ResourceID.binding), now: account.createdAt)
        }
        #expect(try await store.bindingCounts().first { $0.type == .fcm && $0.status == .active }?.count == 3)

        let other = try await SQLiteHandle.open(path: path)
        _ = try await other.offloaded { try $0.query("UPDATE binding_counts SET n = 1000 WHERE type = 'fcm' AND status = 'active'") }
        try await other.close()
        #expect(try await store.bindingCounts().first { $0.type == .fcm && $0.status == .active }?.count == 1000)
        try await store.close()
    }

    /// The store's caches of keys and bindings are bounded in time as well as size: an entry is
    /// used only until its age passes `maxAge`, then read from the file again.
    @Test func cachedKeysAndBindingsExpire() async throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let key = APIKeyRecord(id: "key_1", accountID: "acc_1", secretHash: "h", hint: "abcd", createdAt: now)
        let keys = GenerationCache<APIKeyRecord>(maxAge: .seconds(2))
        keys.store(key, for: "h", ifGeneration: keys.lookup("h").generation)
        #expect(keys.lookup("h").value == key)
        try await Task.sleep(for: .milliseconds(2_050))
        #expect(keys.lookup("h").value == nil)

        let bindings = BindingCache(maxAge: .seconds(2))
        bindings.store([], accountID: "acc_1", identity: "bob", ifVersion: bindings.lookup(accountID: "acc_1", identity: "bob").version)
        #expect(bindings.lookup(accountID: "acc_1", identity: "bob").bindings == [])
        try await Task.sleep(for: .milliseconds(2_050))
        #expect(bindings.lookup(accountID: "acc_1", identity: "bob").bindings == nil)
    }

    /// An account's call defaults are read once, and a read that started before a write does not
    /// put the old defaults back after it.
    @Test func callDefaultsAreCachedUntilWritten() async throws {
        let cache = GenerationCache<CallDefaults>(capacity: 2)
        let before = cache.lookup("acc_1")
        #expect(before.value == nil)
        cache.forget("acc_1")  // a write lands while the read is in flight
        cache.store(CallDefaults(), for: "acc_1", ifGeneration: before.generation)
        #expect(cache.lookup("acc_1").value == nil)
        cache.store(CallDefaults(ifBusy: .reject), for: "acc_1", ifGeneration: cache.lookup("acc_1").generation)
        #expect(cache.lookup("acc_1").value == CallDefaults(ifBusy: .reject))
        // Bounded: a third account starts the cache over.
        cache.store(CallDefaults(), for: "acc_2", ifGeneration: cache.lookup("acc_2").generation)
        cache.store(CallDefaults(), for: "acc_3", ifGeneration: cache.lookup("acc_3").generation)
        #expect(cache.lookup("acc_1").value == nil)
        #expect(cache.lookup("acc_3").value == CallDefaults())

        // Through the store, on a real file: the write is seen at once by the next read.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (store, account) = try await Self.storeWithAccount(at: directory.appending("ringrelay.sqlite"))
        #expect(try await store.callDefaults(accountID: account.id) == CallDefaults())
        try await store.setCallDefaults(CallDefaults(ifBusy: .reject, notifyMissed: true), accountID: account.id)
        #expect(try await store.callDefaults(accountID: account.id) == CallDefaults(ifBusy: .reject, notifyMissed: true))
        try await store.setCallDefaults(CallDefaults(), accountID: account.id)
        #expect(try await store.callDefaults(accountID: account.id) == CallDefaults())
        try await store.close()
    }
}
