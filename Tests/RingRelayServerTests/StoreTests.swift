import Foundation
import HTTPTypes
import Logging
import RingRelayCore
import RingRelayStore
import RingRelayTesting
import Testing
import RingRelayWire

@Suite struct StoreTests {
    private func registration(_ identity: String, token: String, account: String) throws -> BindingRegistration {
        try BindingRegistration(accountID: account, identity: identity, type: .fcm, token: token, environment: nil, deviceID: nil, publicKey: nil)
    }

    @Test func dataSurvivesClosingAndReopening() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("ringrelay.sqlite")
        let now = Date(timeIntervalSince1970: 1_790_000_000.123)
        let account = Account(id: ResourceID.make(ResourceID.account, at: now), name: "acme", createdAt: now)
        let key = APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h", hint: "abcd", createdAt: now)

        let first = try await SQLiteStore.open(path: path, logger: TestLogging.logger("test"))
        try await first.createAccount(account, firstKey: key)
        let created = try await first.upsertBinding(try registration("bob", token: "t1", account: account.id), newID: ResourceID.make(ResourceID.binding), now: now)
        try await first.putCredential(.webex(WebexCredential(secret: "s3cret-value")), accountID: account.id, at: now)
        let setting = try await first.setting(named: "x") { Data([1, 2, 3]) }
        let call = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: account.id, source: .native, caller: "alice", callerName: "Alice",
            callerAvatarURL: "https://cdn.example.com/alice.png", callee: "bob", state: .ringing, externalID: nil, createdAt: now,
            ringDeadline: now.addingTimeInterval(45), updatedAt: now, notifyMissed: false, isSealed: true)
        _ = try await first.createCall(call)
        try await first.close()

        let second = try await SQLiteStore.open(path: path, logger: TestLogging.logger("test"))
        #expect(try await second.schemaVersion() == 10)
        let stored = try await second.call(id: call.id, accountID: account.id)
        #expect(stored?.callerAvatarURL == "https://cdn.example.com/alice.png")
        #expect(stored?.notifyMissed == false)
        #expect(stored?.isSealed == true)
        #expect(try await second.listAccounts() == [account])
        #expect(try await second.activeKey(secretHash: "h")?.id == key.id)
        #expect(try await second.binding(id: created.binding.id, accountID: account.id, identity: nil) == created.binding)
        #expect(try await second.credential(kind: .webex, accountID: account.id)?.credential == .webex(WebexCredential(secret: "s3cret-value")))
        #expect(try await second.setting(named: "x") { Data([9]) } == setting)
        try await second.close()
    }

    /// A file a newer RingRelay wrote is refused with a clear message, never half-read or
    /// migrated down (issue 16 item 13); a backup is a consistent, private copy.
    @Test func aNewerSchemaIsRefusedAndBackupsCopyEverything() async throws {
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
        // Pretend a newer version migrated the copy.
        try await copy.markSchemaVersionForTesting(999)
        try await copy.close()
        do {
            _ = try await SQLiteStore.open(path: directory.appending("copy.sqlite"), logger: TestLogging.logger("test"))
            Issue.record("a database of schema 999 was opened")
        } catch let error as RingRelayError {
            #expect(error.message.contains("newer RingRelay"), "\(error.message)")
        }
    }

    @Test func concurrentRegistrationsOfOneTokenMakeOneBinding() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await SQLiteStore.open(path: directory.appending("ringrelay.sqlite"), logger: TestLogging.logger("test"))
        let account = Account(id: ResourceID.make(ResourceID.account), name: "acme", createdAt: Date())
        try await store.createAccount(account, firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h", hint: "h", createdAt: Date()))
        let results = try await withThrowingTaskGroup(of: BindingUpsert.self) { group in
            for index in 0..<50 {
                let registration = try registration("user-\(index)", token: "shared", account: account.id)
                group.addTask { try await store.upsertBinding(registration, newID: ResourceID.make(ResourceID.binding), now: Date()) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter(\.created).count == 1)
        #expect(Set(results.map(\.binding.id)).count == 1)
        let page = try await store.listBindings(accountID: account.id, query: BindingQuery())
        #expect(page.items.count == 1)
        try await store.close()
        // A closed store answers with an error, not a crash.
        await #expect(throws: RingRelayError.self) { try await store.ping() }
        try await store.close()
    }

    @Test func deletingAnAccountRemovesEverythingItOwns() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await SQLiteStore.open(path: directory.appending("ringrelay.sqlite"), logger: TestLogging.logger("test"))
        let account = Account(id: ResourceID.make(ResourceID.account), name: "acme", createdAt: Date())
        try await store.createAccount(account, firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h", hint: "h", createdAt: Date()))
        let binding = try await store.upsertBinding(try registration("bob", token: "t", account: account.id), newID: ResourceID.make(ResourceID.binding), now: Date())
        try await store.putCredential(.webex(WebexCredential(secret: "s3cret-value")), accountID: account.id, at: Date())
        #expect(try await store.deleteAccount(id: account.id))
        #expect(try await store.binding(id: binding.binding.id, accountID: account.id, identity: nil) == nil)
        #expect(try await store.credentials(accountID: account.id).isEmpty)
        #expect(try await store.activeKey(secretHash: "h") == nil)
        #expect(try await store.bindingCounts().isEmpty)
        try await store.close()
    }

    /// The binding counts `/metrics` shows are kept by the database itself, exact through every
    /// kind of change: new, re-registered, moved between identities, invalidated, revived,
    /// deleted one by one, by identity and with the account.
    @Test func bindingCountsFollowEveryChange() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await SQLiteStore.open(path: directory.appending("ringrelay.sqlite"), logger: TestLogging.logger("test"))
        func counts() async throws -> [String: Int] {
            Dictionary(uniqueKeysWithValues: try await store.bindingCounts().map { ("\($0.type.rawValue)/\($0.status.rawValue)", $0.count) })
        }
        var accounts: [Account] = []
        for name in ["one", "two"] {
            let account = Account(id: ResourceID.make(ResourceID.account), name: name, createdAt: Date())
            try await store.createAccount(
                account, firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: name, hint: "h", createdAt: Date()))
            accounts.append(account)
        }
        func upsert(_ identity: String, _ token: String, _ type: BindingType = .fcm, account: Int = 0) async throws -> Binding {
            let registration = try BindingRegistration(
                accountID: accounts[account].id, identity: identity, type: type, token: token,
                environment: type == .fcm ? nil : .production, deviceID: nil, publicKey: nil)
            return try await store.upsertBinding(registration, newID: ResourceID.make(ResourceID.binding), now: Date()).binding
        }
        let first = try await upsert("bob", "t1")
        _ = try await upsert("bob", "t2")
        _ = try await upsert("carol", String(repeating: "ab", count: 32), .apnsVoIP)
        _ = try await upsert("dave", "t9", account: 1)
        #expect(try await counts() == ["fcm/active": 3, "apns_voip/active": 1])
        // The same token again, even for another identity, is the same binding.
        _ = try await upsert("carol", "t1")
        #expect(try await counts() == ["fcm/active": 3, "apns_voip/active": 1])
        _ = try await store.invalidateBinding(id: first.id, accountID: accounts[0].id, reason: "Unregistered", at: Date(), invalidSince: nil)
        #expect(try await counts() == ["fcm/active": 2, "fcm/invalid": 1, "apns_voip/active": 1])
        _ = try await upsert("carol", "t1")
        #expect(try await counts() == ["fcm/active": 3, "apns_voip/active": 1])
        #expect(try await store.deleteBinding(id: first.id, accountID: accounts[0].id, identity: nil))
        #expect(try await counts() == ["fcm/active": 2, "apns_voip/active": 1])
        #expect(try await store.deleteBindings(accountID: accounts[0].id, identity: "bob") == 1)
        #expect(try await counts() == ["fcm/active": 1, "apns_voip/active": 1])
        #expect(try await store.deleteAccount(id: accounts[0].id))
        #expect(try await counts() == ["fcm/active": 1])
        try await store.close()
    }
}
