import Foundation
import RingRelayCore
import RingRelayTesting
import RingRelayWire
import Testing

/// Every store behaviour, on every engine: the SQLite file and the PostgreSQL database answer
/// alike, and what must hold between concurrent writers holds on each (for PostgreSQL, between
/// instances too: a second handle is a second pool of connections, as another instance has).
@Suite struct StoreConformanceTests {
    private func registration(_ identity: String, token: String, account: String, type: BindingType = .fcm) throws -> BindingRegistration {
        try BindingRegistration(
            accountID: account, identity: identity, type: type, token: token, environment: type == .fcm ? nil : .production, deviceID: nil,
            publicKey: nil)
    }

    private func register(_ store: any DataStore, _ identity: String, token: String, account: String) async throws -> Binding {
        try await store.upsertBinding(
            try registration(identity, token: token, account: account), newID: ResourceID.make(ResourceID.binding), now: Date()
        )
        .binding
    }

    /// The identity's active tokens, sorted (ids made in one millisecond need not sort by creation).
    private func tokens(_ store: any DataStore, _ identity: String, _ account: String) async throws -> [String] {
        try await store.activeBindings(accountID: account, identity: identity).map(\.token).sorted()
    }

    private func ringingCall(
        _ caller: String, _ callee: String, account: String, source: CallSource = .native, externalID: String? = nil, at date: Date
    ) -> Call {
        Call(
            id: ResourceID.make(ResourceID.call, at: date), accountID: account, source: source, caller: caller, callee: callee, state: .ringing,
            externalID: externalID, createdAt: date, ringDeadline: date.addingTimeInterval(30), updatedAt: date)
    }

    /// A ring group's changes are compare-and-set on the call's version: of many changes computed
    /// from one version, made through two handles at once, exactly one is stored; the identity in
    /// the call is busy for the next, the others are not; the history finds the call for each
    /// identity; and the sweep finds an answered group whose others still ring.
    @Test(arguments: StoreEngine.allCases) func ringGroupChangesApplyOnlyToTheVersionTheyCameFrom(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let now = Date(timeIntervalSince1970: 1_790_000_000.123)
        let account = try await opened.makeAccount(at: now)
        let store = opened.store
        let other = try await opened.reopen()
        let call = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: account.id, source: .native, caller: "alice", callee: "bob",
            state: .ringing, externalID: nil, createdAt: now, ringDeadline: Date(millis: now.millis + 30_000), updatedAt: now,
            group: RingGroup(mode: .all, members: ["bob", "carol", "dave"].map { CallParticipant(identity: $0) }))
        #expect(try await store.createCall(call) == .created(call, busy: []))
        let accepts = try await withThrowingTaskGroup(of: Call?.self) { group in
            for (index, identity) in ["bob", "carol", "dave", "bob", "carol", "dave"].enumerated() {
                let handle = index % 2 == 0 ? store : other
                group.addTask {
                    let change = try GroupCallRules.change(
                        for: .accept, on: call, by: CallActor(identity: identity, deviceID: "\(identity)-1"), at: now.addingTimeInterval(1))
                    return try await handle.updateCall(change.call, expectedVersion: call.version)
                }
            }
            return try await group.reduce(into: [Call]()) { if let stored = $1 { $0.append(stored) } }
        }
        #expect(accepts.count == 1)
        let winner = try #require(accepts.first)
        #expect(winner.version == call.version + 1)
        #expect(try await other.call(id: call.id, accountID: account.id) == winner)
        let joined = try #require(winner.group?.joined.first?.identity)
        #expect(winner.group?.members.first { $0.identity == joined }?.answeredAt == Date(millis: now.millis + 1000))

        // Only the identity in the call is busy; a group's later identities are busy too when in it.
        for (offset, identity) in ["bob", "carol", "dave", "erin"].enumerated() {
            let next = ringingCall("zed", identity, account: account.id, at: now.addingTimeInterval(2 + Double(offset)))
            #expect(try await store.createCall(next) == .created(next, busy: identity == joined ? [identity] : []), "\(identity)")
        }
        let group = ringingCall("zed", "erin", account: account.id, at: now.addingTimeInterval(10))
        var busyGroup = group
        busyGroup.group = RingGroup(mode: .first, members: ["erin", joined].map { CallParticipant(identity: $0) })
        #expect(try await store.createCall(busyGroup) == .created(busyGroup, busy: [joined]))

        // Every identity of the first group finds it in its history.
        for identity in ["bob", "carol", "dave"] {
            let page = try await other.listCalls(accountID: account.id, query: CallHistoryQuery(identity: identity, direction: .incoming))
            #expect(page.calls.contains { $0.id == call.id }, "\(identity)")
        }
        // At the deadline the others still ring: the sweep finds the answered group.
        let due = try await store.expiredRingingCalls(before: now.addingTimeInterval(31), limit: 10)
        #expect(due.contains { $0.id == call.id })
        let timedOut = try #require(GroupCallRules.timeout(winner, at: now.addingTimeInterval(31)))
        let swept = try #require(try await other.updateCall(timedOut.call, expectedVersion: winner.version))
        #expect(swept.state == .accepted)
        #expect(!(try await store.expiredRingingCalls(before: now.addingTimeInterval(31), limit: 10)).contains { $0.id == call.id })
        // A change from the old version is refused.
        #expect(try await store.updateCall(timedOut.call, expectedVersion: winner.version) == nil)
        try await other.close()
        try await store.close()
    }

    /// The sweep's batch: every due ring ends in one transaction, each change on its own
    /// condition. One whose call moved on first (cancelled through another handle) changes
    /// nothing and answers `nil` in its place; the others apply, and a second handle reads them.
    @Test(arguments: StoreEngine.allCases) func aBatchOfTimeoutsAppliesEachOnItsOwnCondition(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let account = try await opened.makeAccount(at: now).id
        let store = opened.store
        let calls = (0..<4).map { ringingCall("alice", "bob\($0)", account: account, at: now.addingTimeInterval(Double($0))) }
        for call in calls { _ = try await store.createCall(call) }
        let other = try await opened.reopen()
        try await other.setCallState(id: calls[1].id, accountID: account, state: .cancelled, at: now.addingTimeInterval(5))

        let at = now.addingTimeInterval(40)
        let changed = try await store.transitionCalls(calls.map { CallRules.timeout($0, at: at) })
        #expect(changed.map { $0?.id } == [calls[0].id, nil, calls[2].id, calls[3].id])
        #expect(changed.compactMap { $0 }.allSatisfy { $0.state == .missed && $0.endedAt == at && $0.version == calls[0].version + 1 })
        for (index, call) in calls.enumerated() {
            let stored = try await other.call(id: call.id, accountID: account)
            #expect(stored?.state == (index == 1 ? .cancelled : .missed))
            #expect(try await store.call(id: call.id, accountID: account) == stored)
        }
        #expect(try await store.expiredRingingCalls(before: at, limit: 10).isEmpty)
        #expect(try await store.transitionCalls([]).isEmpty)
        try await other.close()
    }

    @Test(arguments: StoreEngine.allCases) func dataSurvivesClosingAndReopening(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        // Milliseconds are kept exactly, so what is read back compares equal.
        let now = Date(timeIntervalSince1970: 1_790_000_000.123)
        let account = try await opened.makeAccount(at: now)
        let first = opened.store
        let created = try await first.upsertBinding(
            try registration("bob", token: "t1", account: account.id), newID: ResourceID.make(ResourceID.binding), now: now)
        try await first.putCredential(.webex(WebexCredential(secret: "s3cret-value")), accountID: account.id, at: now)
        let setting = try await first.setting(named: "x") { Data([1, 2, 3]) }
        try await first.setCallDefaults(CallDefaults(ifBusy: .reject, notifyMissed: true), accountID: account.id)
        let call = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: account.id, source: .native, caller: "alice", callerName: "Alice",
            callerAvatarURL: "https://cdn.example.com/alice.png", callee: "bob", state: .ringing, externalID: nil, createdAt: now,
            ringDeadline: Date(millis: now.millis + 45_000), updatedAt: now, notifyMissed: false, isSealed: true)
        _ = try await first.createCall(call)
        try await first.close()

        let second = try await opened.reopen()
        #expect(try await second.call(id: call.id, accountID: account.id) == call)
        #expect(try await second.listAccounts() == [account])
        #expect(try await second.account(id: account.id) == account)
        #expect(try await second.activeKey(secretHash: "h")?.accountID == account.id)
        #expect(try await second.binding(id: created.binding.id, accountID: account.id, identity: nil) == created.binding)
        #expect(try await second.binding(id: created.binding.id, accountID: account.id, identity: "carol") == nil)
        #expect(try await second.credential(kind: .webex, accountID: account.id)?.credential == .webex(WebexCredential(secret: "s3cret-value")))
        #expect(try await second.credentials(accountID: account.id).map(\.updatedAt) == [now])
        #expect(try await second.setting(named: "x") { Data([9]) } == setting)
        #expect(try await second.callDefaults(accountID: account.id) == CallDefaults(ifBusy: .reject, notifyMissed: true))
        #expect(try await second.deleteCredential(kind: .webex, accountID: account.id))
        #expect(try await second.credential(kind: .webex, accountID: account.id) == nil)
        try await second.close()
    }

    /// A database a newer RingRelay wrote is refused with a clear message, never half-read or
    /// migrated down.
    @Test(arguments: StoreEngine.allCases) func aNewerSchemaIsRefused(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        try await engine.markSchemaVersion(999, in: opened.store)
        try await opened.store.close()
        do {
            _ = try await opened.reopen()
            Issue.record("a database of schema 999 was opened")
        } catch let error as RingRelayError {
            #expect(error.message.contains("newer RingRelay"), "\(error.message)")
            #expect(error.kind == .unavailable)
        }
    }

    @Test(arguments: StoreEngine.allCases) func aTakenAccountNameIsAConflict(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        _ = try await opened.makeAccount("acme", keyHash: "h1")
        do {
            _ = try await opened.makeAccount("acme", keyHash: "h2")
            Issue.record("two accounts named acme")
        } catch let error as RingRelayError {
            #expect(error.code == RingRelayError.Code.accountNameTaken.rawValue)
            #expect(error.kind == .conflict)
        }
        #expect(try await opened.store.listAccounts().count == 1)
        #expect(try await opened.store.activeKey(secretHash: "h2") == nil, "the key went with the refused account")
        try await opened.store.close()
    }

    @Test(arguments: StoreEngine.allCases) func concurrentRegistrationsOfOneTokenMakeOneBinding(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let account = try await opened.makeAccount()
        let other = try await opened.reopen()
        let results = try await withThrowingTaskGroup(of: BindingUpsert.self) { group in
            for index in 0..<50 {
                let registration = try registration("user-\(index)", token: "shared", account: account.id)
                let store = index % 2 == 0 ? opened.store : other
                group.addTask { try await store.upsertBinding(registration, newID: ResourceID.make(ResourceID.binding), now: Date()) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter(\.created).count == 1)
        #expect(Set(results.map(\.binding.id)).count == 1)
        #expect(try await opened.store.listBindings(accountID: account.id, query: BindingQuery()).items.count == 1)
        try await other.close()
        try await opened.store.close()
        // A closed store answers with an error, not a crash; closing twice is harmless.
        await #expect(throws: RingRelayError.self) { try await opened.store.ping() }
        try await opened.store.close()
    }

    @Test(arguments: StoreEngine.allCases) func bindingsPageInIDOrderWithTheirFilters(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount()
        var made: [Binding] = []
        for index in 0..<7 {
            made.append(try await register(store, index % 2 == 0 ? "bob" : "carol", token: "t\(index)", account: account.id))
        }
        _ = try await store.invalidateBinding(id: made[0].id, accountID: account.id, reason: "Unregistered", at: Date(), invalidSince: nil)
        func follow(_ query: BindingQuery) async throws -> [String] {
            var query = query
            var ids: [String] = []
            repeat {
                let page = try await store.listBindings(accountID: account.id, query: query)
                ids += page.items.map(\.id)
                query.after = page.nextAfter
            } while query.after != nil
            return ids
        }
        let byID = made.map(\.id).sorted()
        #expect(try await follow(BindingQuery(limit: 2)) == byID)
        #expect(
            try await follow(BindingQuery(identity: "bob", limit: 1)) == made.enumerated().filter { $0.offset % 2 == 0 }.map(\.element.id).sorted())
        #expect(try await follow(BindingQuery(status: .invalid)) == [made[0].id])
        #expect(try await follow(BindingQuery(identity: "bob", type: .fcm, status: .active)).count == 3)
        #expect(try await follow(BindingQuery(type: .apnsVoIP)).isEmpty)
        #expect(try await store.deleteBinding(id: made[1].id, accountID: account.id, identity: "bob") == false, "only carol's own")
        #expect(try await store.deleteBinding(id: made[1].id, accountID: account.id, identity: "carol"))
        try await store.close()
    }

    /// An invalidation that names when the token stopped being valid leaves a binding registered
    /// since then active: the app registered the token again.
    @Test(arguments: StoreEngine.allCases) func invalidationRespectsARegistrationSinceTheTokenDied(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount()
        let registered = Date(timeIntervalSince1970: 1_790_000_000.5)
        let binding = try await store.upsertBinding(
            try registration("bob", token: "t1", account: account.id), newID: ResourceID.make(ResourceID.binding), now: registered
        ).binding
        let kept = try await store.invalidateBinding(
            id: binding.id, accountID: account.id, reason: "Unregistered", at: registered.addingTimeInterval(5),
            invalidSince: registered.addingTimeInterval(-0.001))
        #expect(kept?.status == .active)
        let invalidated = try await store.invalidateBinding(
            id: binding.id, accountID: account.id, reason: "Unregistered", at: registered.addingTimeInterval(5), invalidSince: registered)
        #expect(invalidated?.status == .invalid)
        #expect(invalidated?.invalidReason == "Unregistered")
        #expect(invalidated?.invalidatedAt == registered.addingTimeInterval(5))
        #expect(try await store.invalidateBinding(id: "bnd_gone", accountID: account.id, reason: "x", at: Date(), invalidSince: nil) == nil)
        try await store.close()
    }

    @Test(arguments: StoreEngine.allCases) func deletingAnAccountRemovesEverythingItOwns(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount()
        let binding = try await register(store, "bob", token: "t", account: account.id)
        try await store.putCredential(.webex(WebexCredential(secret: "s3cret-value")), accountID: account.id, at: Date())
        let call = ringingCall("alice", "bob", account: account.id, at: Date())
        _ = try await store.createCall(call)
        #expect(try await store.deleteAccount(id: account.id))
        #expect(try await store.deleteAccount(id: account.id) == false)
        #expect(try await store.binding(id: binding.id, accountID: account.id, identity: nil) == nil)
        #expect(try await store.credentials(accountID: account.id).isEmpty)
        #expect(try await store.activeKey(secretHash: "h") == nil)
        #expect(try await store.call(id: call.id, accountID: account.id) == nil)
        #expect(try await store.bindingCounts().isEmpty)
        try await store.close()
    }

    /// The binding counts `/metrics` shows are kept by the database itself, exact through every
    /// kind of change: new, re-registered, moved between identities, invalidated, revived,
    /// deleted one by one, by identity and with the account.
    @Test(arguments: StoreEngine.allCases) func bindingCountsFollowEveryChange(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        func counts() async throws -> [String: Int] {
            Dictionary(uniqueKeysWithValues: try await store.bindingCounts().map { ("\($0.type.rawValue)/\($0.status.rawValue)", $0.count) })
        }
        let accounts = [try await opened.makeAccount("one", keyHash: "one"), try await opened.makeAccount("two", keyHash: "two")]
        func upsert(_ identity: String, _ token: String, _ type: BindingType = .fcm, account: Int = 0) async throws -> Binding {
            try await store.upsertBinding(
                try registration(identity, token: token, account: accounts[account].id, type: type), newID: ResourceID.make(ResourceID.binding),
                now: Date()
            ).binding
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

    @Test(arguments: StoreEngine.allCases) func activeBindingsFollowEveryKindOfWrite(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount().id
        let t1 = try await register(store, "bob", token: "t1", account: account)
        _ = try await register(store, "bob", token: "t2", account: account)
        #expect(try await tokens(store, "bob", account) == ["t1", "t2"])
        #expect(try await tokens(store, "bob", account) == ["t1", "t2"], "a second read (from memory, where a store keeps one)")

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

    @Test(arguments: StoreEngine.allCases) func readsRacingWritesEndOnTheStoredTruth(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount().id
        // Tokens hop between two identities while rings read both; afterwards every read agrees
        // with the stored bindings.
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

    @Test(arguments: StoreEngine.allCases) func aRevokedKeyStopsWorkingAtOnce(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount()
        let key = try #require(try await store.activeKey(secretHash: "h"))
        #expect(try await store.activeKey(secretHash: "h") == key, "a second read (from memory, where a store keeps one)")
        #expect(try await store.revokeKey(accountID: account.id, keyID: key.id, at: Date()))
        #expect(try await store.revokeKey(accountID: account.id, keyID: key.id, at: Date()) == false)
        #expect(try await store.activeKey(secretHash: "h") == nil)

        let other = APIKeyRecord(id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "h2", hint: "h", createdAt: Date())
        try await store.addKey(other)
        #expect(try await store.activeKey(secretHash: "h2")?.id == other.id)
        #expect(try await store.deleteAccount(id: account.id))
        #expect(try await store.activeKey(secretHash: "h2") == nil)
        try await store.close()
    }

    /// A first use of a key racing with its revocation (or its account's deletion) must not
    /// leave the key usable: the next use after the revoke returned is refused, in every one of
    /// many interleavings. (Without SQLite's key cache generation check a few hundred trials
    /// were enough to see a revoked key keep working; PostgreSQL keeps no cache, so fewer
    /// trials, each a few round trips, show it.)
    @Test(arguments: StoreEngine.allCases, [false, true]) func revocationHoldsWhateverTheInterleaving(engine: StoreEngine, deleteAccount: Bool)
        async throws
    {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let trials = engine == .sqlite ? 5_000 : 300
        var survivors = 0
        for trial in 0..<trials {
            let account = Account(id: ResourceID.make(ResourceID.account), name: "t\(trial)", createdAt: Date())
            let key = APIKeyRecord(
                id: ResourceID.make(ResourceID.apiKey), accountID: account.id, secretHash: "race-\(trial)", hint: "race", createdAt: Date())
            try await store.createAccount(account, firstKey: key)
            // The key's first uses race with its end.
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
        #expect(
            survivors == 0, "\(survivors) of \(trials) keys kept working after \(deleteAccount ? "their account's deletion" : "their revocation")")
        try await store.close()
    }

    /// Calls created at once each get their own answer: one `created` per notification id, the
    /// same call as `existing` for its repeats, whichever handle (instance) they reach, and every
    /// call readable afterwards.
    @Test(arguments: StoreEngine.allCases) func callsCreatedAtOnceEachGetTheirOwnAnswer(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let account = try await opened.makeAccount()
        let stores = [opened.store, try await opened.reopen()]
        let now = Date()
        let outcomes = try await withThrowingTaskGroup(of: (String, CallCreation).self) { group in
            for index in 0..<300 {
                let store = stores[index % stores.count]
                let notification = "notification-\(index % 100)"  // each one three times
                let call = ringingCall("client:alice", "bob", account: account.id, source: .twilio, externalID: notification, at: now)
                group.addTask { (notification, try await store.createCall(call)) }
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
        for id in created.values { #expect(try await stores[1].call(id: id, accountID: account.id) != nil) }
        for store in stores { try await store.close() }
    }

    /// Fifty devices accept one ringing call at once, through several handles (for PostgreSQL,
    /// several instances' connections): exactly one wins, and the call is answered by it.
    @Test(arguments: StoreEngine.allCases) func fiftyConcurrentAcceptsHaveExactlyOneWinner(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let account = try await opened.makeAccount()
        let stores = [opened.store, try await opened.reopen(), try await opened.reopen()]
        let now = Date()
        let call = ringingCall("alice", "bob", account: account.id, at: now)
        _ = try await opened.store.createCall(call)
        let winners = try await withThrowingTaskGroup(of: Call?.self) { group in
            for device in 0..<50 {
                let store = stores[device % stores.count]
                let change = try CallRules.change(
                    for: .accept, on: call, by: CallActor(identity: "bob", deviceID: "d\(device)"), at: now.addingTimeInterval(1))
                group.addTask { try await store.transitionCall(change) }
            }
            return try await group.reduce(into: [Call]()) { if let won = $1 { $0.append(won) } }
        }
        #expect(winners.count == 1)
        let stored = try #require(try await stores[2].call(id: call.id, accountID: account.id))
        #expect(stored.state == .accepted)
        #expect(stored == winners.first)
        #expect(stored.answeredBy == winners.first?.answeredBy)
        for store in stores { try await store.close() }
    }

    @Test(arguments: StoreEngine.allCases) func deliveryRecordsAreReadBackAtOnceAndSurviveClosing(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount()
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let call = ringingCall("alice", "bob", account: account.id, at: now)
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
        // A record whose call is gone, among many: refused alone, its neighbours written.
        store.recordDeliveries([
            Delivery(id: ResourceID.make(ResourceID.delivery), callID: "call_gone_early", bindingID: nil, channel: .apns, kind: "voip", createdAt: now)
        ])
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
        let orphan = Delivery(
            id: ResourceID.make(ResourceID.delivery), callID: "call_gone", bindingID: nil, channel: .apns, kind: "voip", createdAt: now)
        let last = Delivery(
            id: ResourceID.make(ResourceID.delivery), callID: call.id, bindingID: "bnd_last", channel: .apns, kind: "voip", createdAt: now)
        store.recordDeliveries([orphan, last])
        try await store.close()
        let reopened = try await opened.reopen()
        let after = try await reopened.deliveries(callID: call.id)
        #expect(after.count == 451)
        #expect(after.contains { $0.id == last.id })
        #expect(try await reopened.deliveries(callID: "call_gone").isEmpty)
        #expect(try await reopened.deliveries(callID: "call_gone_early").isEmpty)
        try await reopened.close()
    }

    /// A device's sign-out is kept per device, an identity's counts for each of its devices, the
    /// later of two wins, and both go with their account or once forgotten.
    @Test(arguments: StoreEngine.allCases) func signOutsAreKeptPerDeviceUntilForgotten(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount()
        let other = try await opened.makeAccount("other", keyHash: "h2")
        let t0 = Date(timeIntervalSince1970: 1_790_000_000)
        #expect(try await store.signedOut(accountID: account.id, identity: "bob", deviceID: "b1") == nil)
        try await store.signOutDevices(accountID: account.id, identity: "bob", deviceIDs: ["b1"], at: t0)
        try await store.signOutDevices(accountID: account.id, identity: "bob", deviceIDs: ["b1"], at: t0.addingTimeInterval(-5))
        #expect(try await store.signedOut(accountID: account.id, identity: "bob", deviceID: "b1") == t0)
        #expect(try await store.signedOut(accountID: account.id, identity: "bob", deviceID: "b2") == nil)
        #expect(try await store.signedOut(accountID: other.id, identity: "bob", deviceID: "b1") == nil)
        // The whole identity, later: every device of it, known or not.
        try await store.signOutDevices(accountID: account.id, identity: "bob", deviceIDs: nil, at: t0.addingTimeInterval(10))
        #expect(try await store.signedOut(accountID: account.id, identity: "bob", deviceID: "b1") == t0.addingTimeInterval(10))
        #expect(try await store.signedOut(accountID: account.id, identity: "bob", deviceID: "anything") == t0.addingTimeInterval(10))
        try await store.signOutDevices(accountID: other.id, identity: "bob", deviceIDs: ["b1"], at: t0)

        #expect(try await store.forgetSignOuts(before: t0.addingTimeInterval(5)) == 2)
        #expect(try await store.signedOut(accountID: account.id, identity: "bob", deviceID: "b2") == t0.addingTimeInterval(10))
        #expect(try await store.deleteAccount(id: account.id))
        #expect(try await store.signedOut(accountID: account.id, identity: "bob", deviceID: "b2") == nil)
        try await store.close()
    }

    /// Delivery records the database cannot take (a full disk) fail the flush that promised them
    /// (the answer is a 503, not a 201 reporting records that are not there) and wait: the next
    /// write, once the database can take them, stores every one.
    @Test(arguments: StoreEngine.allCases) func deliveriesTheDatabaseCannotTakeFailTheFlushAndWait(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount()
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let call = ringingCall("alice", "bob", account: account.id, at: now)
        #expect(try await store.createCall(call) == .created(call, busy: []))

        try await engine.failDeliveryWrites(true, in: store)
        // Large enough rows that the file must grow.
        let planned = (0..<300).map { index in
            Delivery(
                id: ResourceID.make(ResourceID.delivery, at: now.addingTimeInterval(Double(index) / 1000)), callID: call.id,
                bindingID: "bnd_\(index)_" + String(repeating: "x", count: 400), channel: .fcm, kind: "data", createdAt: now)
        }
        store.recordDeliveries(planned)
        let failure = await #expect(throws: RingRelayError.self) { try await store.flushDeliveries() }
        #expect(failure?.kind == .unavailable)

        try await engine.failDeliveryWrites(false, in: store)
        try await store.flushDeliveries()
        #expect(try await store.deliveries(callID: call.id).map(\.id) == planned.map(\.id))
        try await store.close()
    }

    /// A registration stays within its room: an identity's active bindings up to its limit, a
    /// token the account does not have only while the account has room. Re-registering an
    /// active binding of the same identity always goes through; moving a token to a full
    /// identity, or reviving an invalidated one there, does not.
    @Test(arguments: StoreEngine.allCases) func registrationsStayWithinTheirRoom(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let account = try await opened.makeAccount(at: now).id
        let room = BindingRoom(perIdentity: 3, accountHasRoom: true)
        var index = 0
        func upsert(_ identity: String, _ token: String, room: BindingRoom) async throws -> BindingUpsert? {
            index += 1
            return try await store.upsertBinding(
                registration(identity, token: token, account: account), newID: "bnd_\(String(format: "%04d", index))", now: now, room: room)
        }
        for token in ["b1", "b2", "b3"] { #expect(try await upsert("bob", token, room: room)?.created == true) }
        #expect(try await upsert("bob", "b4", room: room) == nil, "a fourth active binding for bob")
        #expect(try await upsert("bob", "b1", room: room)?.created == false, "re-registering one of bob's is not a new one")
        #expect(try await upsert("carol", "c1", room: room)?.created == true)
        #expect(try await upsert("bob", "c1", room: room) == nil, "carol's token may not move to bob, who is full")
        // An invalidated binding frees its place; registered again, it takes one.
        _ = try await store.invalidateBinding(id: "bnd_0002", accountID: account, reason: "Unregistered", at: now, invalidSince: nil)
        #expect(try await upsert("bob", "c1", room: room)?.created == false, "bob has room again: carol's token moves")
        #expect(try await upsert("bob", "b2", room: room) == nil, "reviving b2 would make a fourth")
        // A full account registers no new token, but still its own.
        let full = BindingRoom(perIdentity: 3, accountHasRoom: false)
        #expect(try await upsert("dave", "d1", room: full) == nil)
        #expect(try await upsert("dave", "b3", room: full)?.created == false, "a token the account has moves, full or not")
        #expect(try await store.bindingCount(accountID: account) == 4)
        #expect(try await store.activeBindings(accountID: account, identity: "bob").map(\.token).sorted() == ["b1", "c1"])
        try await store.close()
    }

    /// The sweep of calls to one identity: two sweeps through two handles at once end every
    /// due call exactly once between them (on PostgreSQL each skips the rows the other holds,
    /// rather than waiting for them), oldest deadline first within the limit, and leave alone
    /// calls still inside their ring time, calls that moved on, and ring groups.
    @Test(arguments: StoreEngine.allCases) func sweepsAtOnceEndEachDueCallOnceAndLeaveTheRest(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let other = try await opened.reopen()
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let account = try await opened.makeAccount(at: now).id
        var due: [Call] = []
        for index in 0..<60 {
            var call = ringingCall("alice", "bob\(index)", account: account, at: now.addingTimeInterval(Double(index) / 100))
            call.id = ResourceID.make(ResourceID.call, at: now.addingTimeInterval(Double(index) / 1000))
            _ = try await store.createCall(call)
            due.append(call)
        }
        let later = ringingCall("alice", "late", account: account, at: now.addingTimeInterval(20))
        _ = try await store.createCall(later)
        var group = ringingCall("alice", "erin", account: account, at: now.addingTimeInterval(0.5))
        group.group = RingGroup(mode: .first, members: ["erin", "frank"].map { CallParticipant(identity: $0) })
        _ = try await store.createCall(group)
        try await other.setCallState(id: due[7].id, accountID: account, state: .cancelled, at: now.addingTimeInterval(1))

        let at = now.addingTimeInterval(31)
        // The limit takes the oldest deadlines first.
        let first = try await store.endUnansweredCalls(at: at, limit: 3)
        #expect(first.map(\.id) == due.prefix(3).map(\.id))
        async let one = store.endUnansweredCalls(at: at, limit: 500)
        async let two = other.endUnansweredCalls(at: at, limit: 500)
        let (ended, endedToo) = try await (one, two)
        let all = first + ended + endedToo
        #expect(all.count == 59, "each due call once (one was cancelled): \(first.count) + \(ended.count) + \(endedToo.count)")
        #expect(Set(all.map(\.id)) == Set(due.map(\.id)).subtracting([due[7].id]))
        #expect(all.allSatisfy { $0.state == .missed && $0.endReason == .unanswered && $0.endedAt == at && $0.version == due[0].version + 1 })
        for call in all.prefix(5) { #expect(try await other.call(id: call.id, accountID: account) == call) }
        #expect(try await other.call(id: due[7].id, accountID: account)?.state == .cancelled)
        #expect(try await store.call(id: later.id, accountID: account)?.state == .ringing)
        #expect(try await store.call(id: group.id, accountID: account)?.state == .ringing, "ring groups end by their own rules")
        #expect(try await store.endUnansweredCalls(at: at, limit: 500).isEmpty)
        try await other.close()
        try await store.close()
    }

    /// Every instance sweeps the same due calls, and many share their deadline (a few hundred
    /// calls a second land in the same millisecond): two sweeps of one batch through two handles
    /// at once, in opposite orders, each call ended once, and neither fails. On PostgreSQL they
    /// once locked the rows in their own orders and one was killed as a deadlock (40P01).
    @Test(arguments: StoreEngine.allCases) func twoSweepsOfTheSameCallsAtOnceEndEachOnce(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let other = try await opened.reopen()
        let account = try await opened.makeAccount().id
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        for round in 0..<5 {
            var calls: [Call] = []
            for index in 0..<30 {
                var call = ringingCall("caller\(round)-\(index)", "callee\(round)-\(index)", account: account, at: now)
                call.id = ResourceID.make(ResourceID.call, at: now.addingTimeInterval(Double(index) / 1000))
                _ = try await store.createCall(call)
                calls.append(call)
            }
            let changes = calls.map { CallRules.timeout($0, at: now.addingTimeInterval(31)) }
            async let forward = store.transitionCalls(changes)
            async let backward = other.transitionCalls(changes.reversed())
            let (ended, endedToo) = try await (forward, backward)
            let winners = zip(ended, endedToo.reversed()).map { [$0, $1].compactMap { $0 }.count }
            #expect(winners.allSatisfy { $0 == 1 }, "round \(round): \(winners)")
        }
        try await other.close()
        try await store.close()
    }

    @Test(arguments: StoreEngine.allCases) func callsReadBackAsStoredAndCreationTellsWhetherTheCalleeIsBusy(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let account = try await opened.makeAccount().id
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        func call(_ caller: String, _ callee: String, source: CallSource = .native, at offset: TimeInterval = 0) -> Call {
            ringingCall(
                caller, callee, account: account, source: source, externalID: source == .native ? nil : "ext-\(offset)",
                at: now.addingTimeInterval(offset))
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

        // A second handle on the same data reads exactly what this store answers.
        let other = try await opened.reopen()
        for id in [first.id, toBob.id, toAlice.id, providerCall.id] {
            #expect(try await store.call(id: id, accountID: account) == other.call(id: id, accountID: account))
        }
        // A change through the other handle wins; this one's, whose condition no longer holds,
        // changes nothing, and this store then answers what the other wrote.
        try await other.setCallState(id: toBob.id, accountID: account, state: .cancelled, at: now.addingTimeInterval(4))
        let late = try CallRules.change(for: .accept, on: toBob, by: CallActor(identity: "bob", deviceID: "b2"), at: now.addingTimeInterval(5))
        #expect(try await store.transitionCall(late) == nil)
        #expect(try await store.call(id: toBob.id, accountID: account)?.state == .cancelled)
        try await other.close()

        // The sweep finds the calls whose ring time is over, oldest deadline first.
        let expired = try await store.expiredRingingCalls(before: now.addingTimeInterval(40), limit: 10)
        #expect(expired.map(\.id) == [toAlice.id, providerCall.id])
        // Provider calls (their notification ids) may be kept longer than the rest, with nothing
        // but what routes a replay to them: no caller, no delivery records.
        store.recordDeliveries([
            Delivery(id: ResourceID.make(ResourceID.delivery), callID: providerCall.id, bindingID: "bnd_1", channel: .apns, kind: "voip", createdAt: now)
        ])
        #expect(try await store.deliveries(callID: providerCall.id).count == 1)
        #expect(try await store.pruneCalls(createdBefore: now.addingTimeInterval(10), notificationsCreatedBefore: now) == 3)
        let kept = try await store.call(id: providerCall.id, accountID: account)
        #expect(kept?.externalID == providerCall.externalID)
        #expect(kept?.callee == "erin")
        #expect(kept != nil && kept?.caller == nil)
        #expect(try await store.deliveries(callID: providerCall.id).isEmpty)
        #expect(try await store.pruneCalls(createdBefore: now.addingTimeInterval(10)) == 1)
        #expect(try await store.call(id: first.id, accountID: account) == nil)
        try await store.close()
    }

    /// A state filter looks at a bounded window of calls per page: pages may come short, even
    /// empty, while more follow, but following them finds every call once, newest first.
    @Test(arguments: StoreEngine.allCases) func aRareStateIsFoundThroughBoundedWindows(engine: StoreEngine) async throws {
        let opened = try await engine.makeStore()
        defer { opened.remove() }
        let store = opened.store
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        let account = try await opened.makeAccount(at: start)
        // 2,500 calls between alice and bob, two to a millisecond; every 100th is missed, and the
        // oldest one unreachable.
        var calls: [Call] = []
        for index in 0..<2_500 {
            let at = Date(timeIntervalSince1970: Double(1_790_000_000_000 + index / 2) / 1000)
            let state: CallState = index == 0 ? .unreachable : index % 100 == 7 ? .missed : .ended
            let (caller, callee) = index % 3 == 0 ? ("bob", "alice") : ("alice", "bob")
            let call = Call(
                id: ResourceID.make(ResourceID.call, at: at), accountID: account.id, source: .native, caller: caller, callee: callee, state: state,
                externalID: nil, createdAt: at, ringDeadline: at.addingTimeInterval(45), updatedAt: at)
            _ = try await store.createCall(call)
            calls.append(call)
        }
        func newestFirst(_ calls: [Call]) -> [String] {
            func millis(_ call: Call) -> Int { Int((call.createdAt.timeIntervalSince1970 * 1000).rounded()) }
            return calls.sorted { (millis($0), $0.id) > (millis($1), $1.id) }.map(\.id)
        }
        /// Every page of `query`, and how many there were.
        func follow(_ query: CallHistoryQuery) async throws -> (ids: [String], pages: Int) {
            var query = query
            var ids: [String] = []
            var pages = 0
            repeat {
                let page = try await store.listCalls(accountID: account.id, query: query)
                #expect(page.calls.count <= query.limit)
                ids += page.calls.map(\.id)
                pages += 1
                query.after = page.next
            } while query.after != nil && pages < 100
            return (ids, pages)
        }

        let missed = calls.filter { $0.state == .missed }
        let all = try await follow(CallHistoryQuery(states: [.missed], limit: 100))
        #expect(all.ids == newestFirst(missed))
        // Three windows of 1,000 calls at most.
        #expect(all.pages == 3)
        let rare = try await follow(CallHistoryQuery(states: [.unreachable]))
        #expect(rare.ids == [calls[0].id])
        #expect(rare.pages == 3)
        // A full page needs no more than its window.
        #expect(try await follow(CallHistoryQuery(states: [.ended], limit: 100)).ids == newestFirst(calls.filter { $0.state == .ended }))
        // Both directions of an identity: two windows, merged.
        let both = try await follow(CallHistoryQuery(identity: "bob", states: [.missed, .unreachable], limit: 7))
        #expect(both.ids == newestFirst(missed + [calls[0]]))
        let outgoing = try await follow(CallHistoryQuery(identity: "bob", direction: .outgoing, states: [.missed], limit: 7))
        #expect(outgoing.ids == newestFirst(missed.filter { $0.caller == "bob" }))
        let incoming = try await follow(CallHistoryQuery(identity: "bob", direction: .incoming, limit: 100))
        #expect(incoming.ids == newestFirst(calls.filter { $0.callee == "bob" }))
        // Without a state filter every page is full.
        let pages = try await follow(CallHistoryQuery(identity: "alice", limit: 100))
        #expect(pages.ids == newestFirst(calls))
        #expect(pages.pages == 25)
        // `since` and `until` bound the range.
        let middle = try await follow(CallHistoryQuery(since: calls[1000].createdAt, until: calls[1010].createdAt, limit: 3))
        #expect(middle.ids == newestFirst(Array(calls[1000..<1010])))
        try await store.close()
    }
}
