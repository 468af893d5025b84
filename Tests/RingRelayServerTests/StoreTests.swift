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

    /// A ring group's changes are compare-and-set on the call's version: of many changes computed
    /// from one version exactly one is stored, and a reopened store reads the group back as written.
    @Test func ringGroupChangesApplyOnlyToTheVersionTheyCameFrom() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.appending("ringrelay.sqlite")
        let now = Date(timeIntervalSince1970: 1_790_000_000.123)
        let store = try await SQLiteStore.open(path: path, logger: TestLogging.logger("test"))
        let account = Account(id: "acc_1", name: "acme", createdAt: now)
        try await store.createAccount(
            account, firstKey: APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h", hint: "abcd", createdAt: now))
        let call = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: "acc_1", source: .native, caller: "alice", callee: "bob", state: .ringing,
            externalID: nil, createdAt: now, ringDeadline: now.addingTimeInterval(30), updatedAt: now,
            group: RingGroup(mode: .all, members: ["bob", "carol", "dave"].map { CallParticipant(identity: $0) }))
        guard case .created(let created, let busy) = try await store.createCall(call) else {
            Issue.record("not created")
            return
        }
        #expect(busy.isEmpty)
        let accepts = try await withThrowingTaskGroup(of: Call?.self) { group in
            for identity in ["bob", "carol", "dave"] {
                group.addTask {
                    let change = try GroupCallRules.change(
                        for: .accept, on: created, by: CallActor(identity: identity, deviceID: "\(identity)-1"), at: now.addingTimeInterval(1))
                    return try await store.updateCall(change.call, expectedVersion: created.version)
                }
            }
            return try await group.reduce(into: [Call]()) { if let stored = $1 { $0.append(stored) } }
        }
        #expect(accepts.count == 1)
        let winner = try #require(accepts.first)
        #expect(winner.version == created.version + 1)
        // The identity now in the call is busy for the next call; the others are not.
        let joined = try #require(winner.group?.joined.first?.identity)
        for identity in ["bob", "carol", "dave", "erin"] {
            let next = Call(
                id: ResourceID.make(ResourceID.call, at: now), accountID: "acc_1", source: .native, caller: "zed", callee: identity, state: .ringing,
                externalID: nil, createdAt: now.addingTimeInterval(2), ringDeadline: now.addingTimeInterval(30), updatedAt: now)
            guard case .created(_, let busy) = try await store.createCall(next) else { continue }
            #expect(busy == (identity == joined ? [identity] : []), "\(identity)")
        }
        try await store.close()

        let reopened = try await SQLiteStore.open(path: path, logger: TestLogging.logger("test"))
        let read = try #require(try await reopened.call(id: call.id, accountID: "acc_1"))
        #expect(read == winner)
        #expect(read.group?.members.first { $0.identity == joined }?.answeredAt == Date(timeIntervalSince1970: 1_790_000_001.123))
        try await reopened.close()
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
