import Foundation
import Logging
import RingRelayCore
import RingRelayStore
import RingRelayTesting
import Testing
import RingRelayWire

/// What only the SQLite store does.
@Suite struct StoreTests {
    /// A backup is a consistent, private copy. (What both engines share is in
    /// StoreConformanceTests.)
    @Test func backupsCopyEverythingPrivately() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("ringrelay.sqlite")
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let account = Account(id: ResourceID.make(ResourceID.account, at: now), name: "acme", createdAt: now)
        let store = try await SQLiteStore.open(path: path, logger: TestLogging.logger("test"))
        try await store.createAccount(account, firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h", hint: "abcd", createdAt: now))
        try await store.backup(to: directory.appending("copy.sqlite"))
        let mode = try FileManager.default.attributesOfItem(atPath: directory.appending("copy.sqlite"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        await #expect(throws: RingRelayError.self) { try await store.backup(to: directory.appending("copy.sqlite")) }
        try await store.close()

        let copy = try await SQLiteStore.open(path: directory.appending("copy.sqlite"), logger: TestLogging.logger("test"))
        #expect(try await copy.listAccounts() == [account])
        #expect(try await copy.schemaVersion() == 10)
        try await copy.close()
    }
}
