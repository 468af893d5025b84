import Foundation
import RingRelayCore
import Synchronization

/// Credentials read on every ring, kept in memory for a few seconds.
///
/// A webhook reads the provider's credential and every delivery reads its push credential; with
/// SQLite serialising statements, those reads were a third of a ring's database work. Uploads and
/// deletes through this server invalidate their entry at once; another instance sharing the store
/// sees a change within ``lifetime``.
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
    private let entries = Mutex<[Key: Entry]>([:])

    init(store: any DataStore, lifetime: Duration = .seconds(5), capacity: Int = 10_000) {
        self.store = store
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// Entries kept now.
    var count: Int { entries.withLock { $0.count } }

    /// The account's credential of `kind`, or `nil` when none is configured.
    func credential(_ kind: CredentialKind, accountID: String) async throws -> Credential? {
        let key = Key(accountID: accountID, kind: kind)
        let now = ContinuousClock.now
        if let entry = entries.withLock({ $0[key] }), entry.expires > now { return entry.credential }
        let credential = try await store.credential(kind: kind, accountID: accountID)?.credential
        entries.withLock { entries in
            if entries.count >= capacity, entries[key] == nil {
                entries = entries.filter { $0.value.expires > now }
                // Still full of live entries (a burst of lookups): start again rather than grow.
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[key] = Entry(credential: credential, expires: now + lifetime)
        }
        return credential
    }

    /// Forgets an account's credentials (after an upload, a delete or the account's deletion).
    func invalidate(accountID: String) {
        entries.withLock { entries in entries = entries.filter { $0.key.accountID != accountID } }
    }
}
