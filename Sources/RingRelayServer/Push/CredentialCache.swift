import Foundation
import RingRelayCore
import Synchronization

/// Credentials read on every ring, kept in memory for a few seconds.
///
/// A webhook reads the provider's credential and every delivery reads its push credential; with
/// SQLite serialising statements, those reads were a third of a ring's database work. Uploads and
/// deletes through this server invalidate their entry at once; another instance sharing the store
/// sees a change within ``lifetime``. A read that started before an invalidation cannot put what
/// it read back afterwards (a generation check, as in the store's key cache), so a deleted
/// credential or account is gone for the next request whatever the interleaving.
///
/// Lookups of a key that is being read wait for that read rather than read too: when an entry
/// expires in the middle of a fan-out, its 10,000 deliveries would otherwise each read and decode
/// the credential (6 % of a 10,000-device ring's CPU, every few calls).
final class CredentialCache: Sendable {
    private struct Key: Hashable {
        var accountID: String
        var kind: CredentialKind
    }

    private struct Entry {
        var credential: Credential?
        var expires: ContinuousClock.Instant
    }

    private enum Lookup {
        case cached(Credential?)
        /// A read of the store to wait for, and the generation it started in.
        case read(Task<Credential?, any Error>, UInt64)
    }

    private let store: any CredentialStore
    private let lifetime: Duration
    /// Most entries kept: past it, expired entries go, and if that is not enough, all of them.
    let capacity: Int
    private struct State {
        var entries: [Key: Entry] = [:]
        /// Reads in progress, each started by a lookup that missed; lookups meanwhile share it.
        var reads: [Key: Task<Credential?, any Error>] = [:]
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())

    init(store: any CredentialStore, lifetime: Duration = .seconds(5), capacity: Int = 10_000) {
        self.store = store
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// Entries kept now.
    var count: Int { state.withLock { $0.entries.count } }

    /// The account's credential of `kind`, or `nil` when none is configured.
    func credential(_ kind: CredentialKind, accountID: String) async throws -> Credential? {
        let key = Key(accountID: accountID, kind: kind)
        let now = ContinuousClock.now
        let store = self.store
        let lookup = state.withLock { state -> Lookup in
            if let cached = state.entries[key], cached.expires > now { return .cached(cached.credential) }
            if let read = state.reads[key] { return .read(read, state.generation) }
            // Created under the lock (only on a miss), so a second lookup finds it and waits for it.
            let read = Task { try await store.credential(kind: kind, accountID: accountID)?.credential }
            state.reads[key] = read
            return .read(read, state.generation)
        }
        let (read, generation): (Task<Credential?, any Error>, UInt64)
        switch lookup {
        case .cached(let credential): return credential
        case .read(let task, let started): (read, generation) = (task, started)
        }
        let credential: Credential?
        do {
            credential = try await read.value
        } catch {
            state.withLock { state in if state.reads[key] == read { state.reads[key] = nil } }
            throw error
        }
        state.withLock { state in
            if state.reads[key] == read { state.reads[key] = nil }
            guard state.generation == generation else { return }
            if state.entries.count >= capacity, state.entries[key] == nil {
                state.entries = state.entries.filter { $0.value.expires > now }
                // Still full of live entries (a burst of lookups): start again rather than grow.
                if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            }
            state.entries[key] = Entry(credential: credential, expires: now + lifetime)
        }
        return credential
    }

    /// Forgets an account's credentials (after an upload, a delete or the account's deletion).
    /// Forgets every entry (after a gap in what other instances told this one).
    func invalidateAll() {
        state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll()
            // A read started before the change may return what it replaced: later lookups start their own.
            state.reads.removeAll()
        }
    }

    func invalidate(accountID: String) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { $0.key.accountID != accountID }
            state.reads = state.reads.filter { $0.key.accountID != accountID }
        }
    }
}
