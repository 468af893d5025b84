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
final class CredentialCache: Sendable {
    private struct Key: Hashable {
        var accountID: String
        var kind: CredentialKind
    }

    private struct Entry {
        var credential: Credential?
        var expires: ContinuousClock.Instant
    }

    private let store: any DataStore
    private let lifetime: Duration
    /// Most entries kept: past it, expired entries go, and if that is not enough, all of them.
    let capacity: Int
    private struct State {
        var entries: [Key: Entry] = [:]
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())

    init(store: any DataStore, lifetime: Duration = .seconds(5), capacity: Int = 10_000) {
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
        let (cached, generation) = state.withLock { ($0.entries[key], $0.generation) }
        if let cached, cached.expires > now { return cached.credential }
        let credential = try await store.credential(kind: kind, accountID: accountID)?.credential
        state.withLock { state in
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
        }
    }

    func invalidate(accountID: String) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { $0.key.accountID != accountID }
        }
    }
}
