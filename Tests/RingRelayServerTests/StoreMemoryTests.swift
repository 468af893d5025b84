import Foundation
import Logging
import RingRelayCore
import RingRelayStore
import RingRelayTesting
import Testing
import RingRelayWire

/// What the store keeps in memory (active bindings, API keys, delivery records not yet written)
/// never disagrees with what it answers after a write.
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

    private func register(_ store: SQLiteStore, _ identity: String, token: String, account: String) async throws -> Binding {
        let registration = try BindingRegistration(
            accountID: account, identity: identity, type: .fcm, token: token, environment: nil, deviceID: nil, publicKey: nil)
        return try await store.upsertBinding(registration, newID: ResourceID.make(ResourceID.binding), now: Date()).binding
    }

    /// The identity's active tokens, sorted (ids made in one millisecond need not sort by creation).
    private func tokens(_ store: SQLiteStore, _ identity: String, _ account: String) async throws -> [String] {
        try await store.activeBindings(accountID: account, identity: identity).map(\.token).sorted()
    }

    @Test func activeBindingsFollowEveryKindOfWrite() async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let (store, account) = (opened.store, opened.account.id)
        let t1 = try await register(store, "bob", token: "t1", account: account)
        _ = try await register(store, "bob", token: "t2", account: account)
        #expect(try await tokens(store, "bob", account) == ["t1", "t2"])
        #expect(try await tokens(store, "bob", account) == ["t1", "t2"], "a second read, from memory")

        // The token moves to another identity: both identities change.
        _ = try await register(store, "carol", token: "t2", account: account)
        #expect(try await tokens(store, "bob", account) == ["t1"])
        #expect(try await tokens(store, "carol", account) == ["t2"])

        // A dead token stops ringing; registering it again brings it back.
        _ = try await store.invalidateBinding(id: t1.id, accountID: account, reason: "Unregistered", at: Date(), invalidSince: nil)
        #expect(try await tokens(store, "bob", account).isEmpty)
        _ = try await register(store, "bob", token: "t1", account: account)
        #expect(try await tokens(store, "bob", account) == ["t1"])

        #expect(try await store.deleteBinding(id: t1.id, accountID: account, identity: nil))
        #expect(try await tokens(store, "bob", account).isEmpty)
        #expect(try await store.deleteBindings(accountID: account, identity: "carol") == 1)
        #expect(try await tokens(store, "carol", account).isEmpty)

        _ = try await register(store, "dave", token: "t3", account: account)
        #expect(try await tokens(store, "dave", account) == ["t3"])
        #expect(try await store.deleteAccount(id: account))
        #expect(try await tokens(store, "dave", account).isEmpty)
        try await store.close()
    }

    @Test func readsRacingWritesEndOnTheStoredTruth() async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let (store, account) = (opened.store, opened.account.id)
        // Tokens hop between two identities while rings read both; afterwards memory and file agree.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for round in 0..<40 {
                group.addTask { _ = try await register(store, round % 2 == 0 ? "bob" : "carol", token: "t\(round % 5)", account: account) }
                group.addTask { _ = try await store.activeBindings(accountID: account, identity: "bob") }
                group.addTask { _ = try await store.activeBindings(accountID: account, identity: "carol") }
            }
            try await group.waitForAll()
        }
        for identity in ["bob", "carol"] {
            let stored = try await store.listBindings(accountID: account, query: BindingQuery(identity: identity, status: .active))
            #expect(try await store.activeBindings(accountID: account, identity: identity) == stored.items)
        }
        try await store.close()
    }

    @Test func aRevokedKeyStopsWorkingAtOnce() async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let store = opened.store
        let key = try #require(try await store.activeKey(secretHash: "h"))
        #expect(try await store.activeKey(secretHash: "h") == key, "a second read, from memory")
        #expect(try await store.revokeKey(accountID: opened.account.id, keyID: key.id, at: Date()))
        #expect(try await store.activeKey(secretHash: "h") == nil)

        let other = APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: opened.account.id, secretHash: "h2", hint: "h", createdAt: Date())
        try await store.addKey(other)
        #expect(try await store.activeKey(secretHash: "h2")?.id == other.id)
        #expect(try await store.deleteAccount(id: opened.account.id))
        #expect(try await store.activeKey(secretHash: "h2") == nil)
        try await store.close()
    }

    /// A first use of a key racing with its revocation (or its account's deletion) must not leave
    /// the key in the cache: the next use after the revoke returned is refused, in every one of
    /// many interleavings. (Without the cache's generation check a few hundred trials were enough
    /// to see a revoked key keep working.)
    static let raceTrials = 5_000

    @Test(arguments: [false, true]) func revocationHoldsWhateverTheInterleaving(deleteAccount: Bool) async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let store = opened.store
        var survivors = 0
        for trial in 0..<Self.raceTrials {
            let account = Account(id: ResourceID.make(ResourceID.account), name: "t\(trial)", createdAt: Date())
            let key = APIKeyRecord(
                id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "race-\(trial)", hint: "race", createdAt: Date())
            try await store.createAccount(account, firstKey: key)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<2 {
                    group.addTask { _ = try await store.activeKey(secretHash: key.secretHash) }
                }
                group.addTask {
                    if deleteAccount {
                        _ = try await store.deleteAccount(id: account.id)
                    } else {
                        _ = try await store.revokeKey(accountID: account.id, keyID: key.id, at: Date())
                    }
                }
                try await group.waitForAll()
            }
            if try await store.activeKey(secretHash: key.secretHash) != nil { survivors += 1 }
        }
        #expect(survivors == 0, "\(survivors) of \(Self.raceTrials) keys kept working after \(deleteAccount ? "their account's deletion" : "their revocation")")
        try await store.close()
    }

    /// Calls created at once are committed in rounds (group commit); each still gets its own
    /// answer: one `created` per notification id, the same call as `existing` for its repeats,
    /// and every call in the file afterwards.
    @Test func callsCreatedAtOnceEachGetTheirOwnAnswer() async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let store = opened.store
        let now = Date()
        let outcomes = try await withThrowingTaskGroup(of: (String, CallCreation).self) { group in
            for index in 0..<300 {
                group.addTask {
                    let notification = "notification-\(index % 100)"  // each one three times
                    let call = Call(
                        id: ResourceID.make(ResourceID.call), accountID: opened.account.id, source: .twilio, caller: "client:alice", callee: "bob",
                        state: .ringing, externalID: notification, createdAt: now, ringDeadline: now.addingTimeInterval(45), updatedAt: now)
                    return (notification, try await store.createCall(call))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        var created: [String: String] = [:]
        var repeats: [(String, String)] = []
        for (notification, outcome) in outcomes {
            switch outcome {
            case .created(let call, _):
                #expect(created.updateValue(call.id, forKey: notification) == nil, "\(notification) created twice")
            case .existing(let call): repeats.append((notification, call.id))
            }
        }
        #expect(created.count == 100)
        #expect(repeats.count == 200)
        #expect(repeats.allSatisfy { created[$0.0] == $0.1 }, "a repeat answered with another call")
        for id in created.values { #expect(try await store.call(id: id, accountID: opened.account.id) != nil) }
        try await store.close()
    }

    @Test func deliveryRecordsAreReadBackAtOnceAndSurviveClosing() async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let store = opened.store
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let call = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: opened.account.id, source: .native, caller: "alice", callee: "bob",
            state: .ringing, externalID: nil, createdAt: now, ringDeadline: now.addingTimeInterval(30), updatedAt: now)
        #expect(try await store.createCall(call) == .created(call, busy: []))

        // More than one statement's worth, recorded from many tasks, then answered.
        let planned = (0..<450).map { index in
            Delivery(
                id: ResourceID.make(ResourceID.delivery, at: now.addingTimeInterval(Double(index) / 1000)), callID: call.id,
                bindingID: "bnd_\(index)", channel: .fcm, kind: "data", createdAt: now)
        }
        await withTaskGroup(of: Void.self) { group in
            for slice in stride(from: 0, to: planned.count, by: 50) {
                group.addTask { store.recordDeliveries(Array(planned[slice..<slice + 50])) }
            }
        }
        let answered = planned.prefix(100).map {
            $0.completed(
                with: PushOutcome(disposition: .delivered, status: 200, reason: nil, providerID: "p", latency: .milliseconds(3), attempts: 1),
                at: now.addingTimeInterval(1))
        }
        store.recordDeliveries(answered)
        let read = try await store.deliveries(callID: call.id)
        #expect(read.count == 450)
        #expect(read.filter { $0.outcome == "delivered" }.map(\.id) == answered.map(\.id))
        #expect(read.first { $0.id == answered[0].id } == answered[0])

        // Records made just before closing are written by the close; a record whose call is gone
        // does not take its neighbours with it.
        let orphan = Delivery(id: ResourceID.make(ResourceID.delivery), callID: "call_gone", bindingID: nil, channel: .apns, kind: "voip", createdAt: now)
        let last = Delivery(id: ResourceID.make(ResourceID.delivery), callID: call.id, bindingID: "bnd_last", channel: .apns, kind: "voip", createdAt: now)
        store.recordDeliveries([orphan, last])
        try await store.close()
        let reopened = try await SQLiteStore.open(path: opened.path, logger: TestLogging.logger("test"))
        let after = try await reopened.deliveries(callID: call.id)
        #expect(after.count == 451)
        #expect(after.contains { $0.id == last.id })
        #expect(try await reopened.deliveries(callID: "call_gone").isEmpty)
        try await reopened.close()
    }

    @Test func callsReadBackAsTheFileHasThemAndCreationTellsWhetherTheCalleeIsBusy() async throws {
        let opened = try await open()
        defer { opened.directory.remove() }
        let (store, account) = (opened.store, opened.account.id)
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        func call(_ caller: String, _ callee: String, source: CallSource = .native, at offset: TimeInterval = 0) -> Call {
            Call(
                id: ResourceID.make(ResourceID.call, at: now.addingTimeInterval(offset)), accountID: account, source: source, caller: caller,
                callee: callee, state: .ringing, externalID: source == .native ? nil : "ext-\(offset)", createdAt: now,
                ringDeadline: now.addingTimeInterval(30), updatedAt: now)
        }
        // Alice calls Bob, who answers; while that call stands, both are busy.
        let first = call("alice", "bob")
        #expect(try await store.createCall(first) == .created(first, busy: []))
        let accepted = try #require(
            try await store.transitionCall(
                try CallRules.change(for: .accept, on: first, by: CallActor(identity: "bob", deviceID: "b1"), at: now.addingTimeInterval(1))))
        #expect(try await store.call(id: first.id, accountID: account) == accepted)
        #expect(try await store.call(id: first.id, accountID: "acc_other") == nil)
        let toBob = call("carol", "bob", at: 2)
        #expect(try await store.createCall(toBob) == .created(toBob, busy: [toBob.callee]))
        let toAlice = call("carol", "alice", at: 3)
        #expect(try await store.createCall(toAlice) == .created(toAlice, busy: [toAlice.callee]))
        // Only a native call makes its caller busy: a provider's caller is not a RingRelay identity.
        let providerCall = call("dave", "erin", source: .twilio, at: 4)
        #expect(try await store.createCall(providerCall) == .created(providerCall, busy: []))

        // Another connection to the same file reads exactly what this store answers.
        let other = try await SQLiteStore.open(path: opened.path, logger: TestLogging.logger("test"))
        for id in [first.id, toBob.id, toAlice.id, providerCall.id] {
            #expect(try await store.call(id: id, accountID: account) == other.call(id: id, accountID: account))
        }
        // A change whose condition fails makes the store read the call from the file again. (Only
        // a second writer, which a deployment does not have, can make that happen.)
        try await other.setCallState(id: toBob.id, accountID: account, state: .cancelled, at: now.addingTimeInterval(4))
        let late = try CallRules.change(for: .accept, on: toBob, by: CallActor(identity: "bob", deviceID: "b2"), at: now.addingTimeInterval(5))
        #expect(try await store.transitionCall(late) == nil)
        #expect(try await store.call(id: toBob.id, accountID: account)?.state == .cancelled)
        try await other.close()

        #expect(try await store.pruneCalls(createdBefore: now.addingTimeInterval(1)) == 4)
        #expect(try await store.call(id: first.id, accountID: account) == nil)
        try await store.close()
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
