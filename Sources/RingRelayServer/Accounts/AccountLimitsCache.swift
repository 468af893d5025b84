import RingRelayCore
import Synchronization

/// The operator's settings of each account (``AccountLimits``), read from the store at most every
/// ``lifetime`` and dropped at once when they change, here or (by a `limitsChanged` notice) on
/// another instance: every webhook, call and binding write asks, and must not cost a query.
final class AccountLimitsCache: Sendable {
    private let store: any DataStore
    private let entries = Mutex<[String: (limits: AccountLimits, readAt: ContinuousClock.Instant)]>([:])
    /// How long settings are used before they are read again (a notice missed in a bus gap is
    /// made good after this).
    static let lifetime: Duration = .seconds(10)
    /// Accounts kept at most; past it, the cache starts over.
    static let capacity = 100_000

    init(store: any DataStore) {
        self.store = store
    }

    /// The account's settings.
    func limits(_ accountID: String) async throws -> AccountLimits {
        let now = ContinuousClock.now
        if let entry = entries.withLock({ $0[accountID] }), now - entry.readAt < Self.lifetime { return entry.limits }
        let limits = try await store.accountLimits(accountID: accountID)
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll() }
            entries[accountID] = (limits, now)
        }
        return limits
    }

    /// The account's settings changed.
    func invalidate(_ accountID: String) {
        _ = entries.withLock { $0.removeValue(forKey: accountID) }
    }

    /// A gap in the bus: any change may have been missed.
    func invalidateAll() {
        entries.withLock { $0.removeAll() }
    }
}
