import Foundation
import RingRelayCore
import Synchronization
import Testing

@testable import RingRelayServer

/// The credential cache in front of the store: one read serves every lookup made while it runs.
@Suite struct CredentialCacheTests {
    /// A credential store that counts its reads and answers each after `delay`.
    final class CountingStore: CredentialStore {
        let reads = Atomic<Int>(0)
        let delay: Duration
        let stored = Mutex<Credential?>(.twilio(TwilioCredential(accountSID: "AC0001", authToken: "first-token")))

        init(delay: Duration) { self.delay = delay }

        func credential(kind: CredentialKind, accountID: String) async throws -> StoredCredential? {
            reads.add(1, ordering: .relaxed)
            try await Task.sleep(for: delay)
            return stored.withLock { $0 }.map { StoredCredential(credential: $0, updatedAt: Date()) }
        }

        func putCredential(_ credential: Credential, accountID: String, at date: Date) async throws {
            stored.withLock { $0 = credential }
        }

        func credentials(accountID: String) async throws -> [StoredCredential] { [] }
        func deleteCredential(kind: CredentialKind, accountID: String) async throws -> Bool { false }
    }

    /// A fan-out's deliveries all look the credential up at once: a cold or expired entry is read
    /// once for them, not once each (10,000 reads and JSON decodes of the same row before).
    @Test func lookupsDuringAReadWaitForItInsteadOfReadingToo() async throws {
        // A long lifetime: a lookup that starts late on a loaded machine finds the entry, never a
        // second expiry.
        let store = CountingStore(delay: .milliseconds(100))
        let cache = CredentialCache(store: store, lifetime: .seconds(2))
        let lookup: @Sendable () async throws -> Credential? = { try await cache.credential(.twilio, accountID: "acc_1") }
        try await withThrowingTaskGroup(of: Credential?.self) { group in
            for _ in 0..<500 { group.addTask(operation: lookup) }
            for try await credential in group { #expect(credential == store.stored.withLock { $0 }) }
        }
        #expect(store.reads.load(ordering: .relaxed) == 1)
        // Expired: one more read, again shared.
        try await Task.sleep(for: .milliseconds(2_100))
        try await withThrowingTaskGroup(of: Credential?.self) { group in
            for _ in 0..<500 { group.addTask(operation: lookup) }
            for try await _ in group {}
        }
        #expect(store.reads.load(ordering: .relaxed) == 2)
    }

    /// A lookup after an upload never waits for a read that started before it: it reads anew and
    /// sees the new credential (the read in flight may still answer its own waiters with the old).
    @Test func aLookupAfterAnInvalidationDoesNotJoinAnOlderRead() async throws {
        let store = CountingStore(delay: .milliseconds(300))
        // A lifetime no loaded machine outlasts: the reads counted are the invalidation's, never an expiry's.
        let cache = CredentialCache(store: store, lifetime: .seconds(600))
        let before = Task { try await cache.credential(.twilio, accountID: "acc_1") }
        while store.reads.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let replacement = Credential.twilio(TwilioCredential(accountSID: "AC0001", authToken: "second-token"))
        try await store.putCredential(replacement, accountID: "acc_1", at: Date())
        cache.invalidate(accountID: "acc_1")
        #expect(try await cache.credential(.twilio, accountID: "acc_1") == replacement)
        #expect(store.reads.load(ordering: .relaxed) == 2)
        _ = try await before.value
        // What the older read returned was not kept.
        #expect(try await cache.credential(.twilio, accountID: "acc_1") == replacement)
        #expect(store.reads.load(ordering: .relaxed) == 2)
    }

    /// A failed read is not kept: the next lookup reads again.
    @Test func aFailedReadIsNotKept() async throws {
        struct Unreachable: Error {}
        final class FailingOnce: CredentialStore {
            let reads = Atomic<Int>(0)
            func credential(kind: CredentialKind, accountID: String) async throws -> StoredCredential? {
                if reads.add(1, ordering: .relaxed).newValue == 1 { throw Unreachable() }
                return nil
            }
            func putCredential(_ credential: Credential, accountID: String, at date: Date) async throws {}
            func credentials(accountID: String) async throws -> [StoredCredential] { [] }
            func deleteCredential(kind: CredentialKind, accountID: String) async throws -> Bool { false }
        }
        let store = FailingOnce()
        // The second read's answer must be the one the third lookup finds, however late it runs
        // (5 s passed between two lookups in a suite run with every test at once).
        let cache = CredentialCache(store: store, lifetime: .seconds(600))
        await #expect(throws: Unreachable.self) { try await cache.credential(.apns, accountID: "acc_1") }
        #expect(try await cache.credential(.apns, accountID: "acc_1") == nil)
        #expect(try await cache.credential(.apns, accountID: "acc_1") == nil)
        #expect(store.reads.load(ordering: .relaxed) == 2)
    }
}
