import RingRelayCore
import Synchronization

/// The active bindings of recently rung identities, so a ring does not read them from disk.
///
/// Every binding write of an account drops that account's entries and bumps its version. A read
/// that started before a write cannot put what it read back afterwards: ``store(_:accountID:identity:ifVersion:)``
/// keeps the bindings only while the account's version is still the one seen before the read.
/// The store is the only writer of its file, so nothing changes behind the cache's back; still,
/// an entry is kept at most ``maxAge``, so what an identity's bindings cost in memory ends with
/// its calls.
final class BindingCache: Sendable {
    private struct Entry {
        var bindings: [Binding]
        var storedAt: ContinuousClock.Instant
    }

    private struct State {
        var entries: [String: [String: Entry]] = [:]
        var versions: [String: UInt64] = [:]
        var count = 0
    }

    private let state = Mutex(State())
    /// Identities held before the whole cache is dropped and starts over.
    let capacity: Int
    /// How long an entry is used.
    let maxAge: Duration

    init(capacity: Int = 50_000, maxAge: Duration = .seconds(600)) {
        self.capacity = capacity
        self.maxAge = maxAge
    }

    /// The cached bindings and the account's version, which a miss passes back to ``store``.
    func lookup(accountID: String, identity: String) -> (bindings: [Binding]?, version: UInt64) {
        let now = ContinuousClock.now
        return state.withLock { state in
            let entry = state.entries[accountID]?[identity]
            return (entry.flatMap { now - $0.storedAt < maxAge ? $0.bindings : nil }, state.versions[accountID, default: 0])
        }
    }

    /// Keeps `bindings` unless the account changed since `version` was read.
    func store(_ bindings: [Binding], accountID: String, identity: String, ifVersion version: UInt64) {
        state.withLock { state in
            guard state.versions[accountID, default: 0] == version else { return }
            if state.count >= capacity {
                state.entries.removeAll(keepingCapacity: true)
                state.count = 0
            }
            if state.entries[accountID, default: [:]].updateValue(Entry(bindings: bindings, storedAt: .now), forKey: identity) == nil {
                state.count += 1
            }
        }
    }

    /// Forgets the account's bindings; called after each write to them.
    func invalidate(accountID: String) {
        state.withLock { state in
            state.versions[accountID, default: 0] &+= 1
            if let dropped = state.entries.removeValue(forKey: accountID) {
                state.count -= dropped.count
            }
        }
    }
}

/// Unrevoked API keys by secret hash, so an authenticated request does not read its key from disk.
///
/// Revoking a key or deleting an account drops the entries concerned and bumps the generation. A
/// lookup that read its key from disk before such a change cannot put it back afterwards:
/// ``store(_:ifGeneration:)`` keeps the key only while the generation is still the one the miss
/// saw, so a revocation holds on the next request whatever the interleaving. A key is kept at
/// most ``maxAge``, then read again.
final class KeyCache: Sendable {
    private struct State {
        var keys: [String: (key: APIKeyRecord, storedAt: ContinuousClock.Instant)] = [:]
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
    let capacity: Int
    /// How long an entry is used.
    let maxAge: Duration

    init(capacity: Int = 10_000, maxAge: Duration = .seconds(600)) {
        self.capacity = capacity
        self.maxAge = maxAge
    }

    /// The cached key and the current generation, which a miss passes back to ``store(_:ifGeneration:)``.
    func lookup(secretHash: String) -> (key: APIKeyRecord?, generation: UInt64) {
        let now = ContinuousClock.now
        return state.withLock { state in
            (state.keys[secretHash].flatMap { now - $0.storedAt < maxAge ? $0.key : nil }, state.generation)
        }
    }

    /// Keeps `key` unless a key was revoked or an account deleted since `generation` was read.
    func store(_ key: APIKeyRecord, ifGeneration generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.keys.count >= capacity { state.keys.removeAll(keepingCapacity: true) }
            state.keys[key.secretHash] = (key, .now)
        }
    }

    /// Drops the keys `shouldForget` names; called after the change is in the database.
    func forget(where shouldForget: (APIKeyRecord) -> Bool) {
        state.withLock { state in
            state.generation &+= 1
            state.keys = state.keys.filter { !shouldForget($0.value.key) }
        }
    }
}

/// Recently created or changed calls by id, so a command on a ringing call does not read it
/// from disk first.
///
/// The store updates it inside the same lock as the statement that changed the call, so it
/// never holds a state older than the file's; a change whose condition failed drops the call,
/// because the store then does not know what won. Two generations bound it: when the newer one
/// fills, the older is dropped and the newer takes its place.
final class CallCache: Sendable {
    private struct State {
        var current: [String: Call] = [:]
        var previous: [String: Call] = [:]
    }

    private let state = Mutex(State())
    /// Calls per generation.
    let generation: Int

    init(generation: Int = 10_000) {
        self.generation = generation
    }

    func call(id: String) -> Call? {
        state.withLock { $0.current[id] ?? $0.previous[id] }
    }

    func put(_ call: Call) {
        state.withLock { state in
            state.previous[call.id] = nil
            state.current[call.id] = call
            if state.current.count >= generation {
                state.previous = state.current
                state.current = [:]
            }
        }
    }

    func forget(id: String) {
        state.withLock { state in
            state.current[id] = nil
            state.previous[id] = nil
        }
    }

    func forgetAll() {
        state.withLock { $0 = State() }
    }
}

/// Each account's call defaults, read once: a missed call reads them to know whether to send
/// notices, and at 1,000 calls a second that was a statement a call waiting for the one
/// connection.
///
/// As in ``BindingCache``, a write bumps a version, and a read that started before it cannot
/// put what it read back afterwards.
final class CallDefaultsCache: Sendable {
    private struct State {
        var entries: [String: CallDefaults] = [:]
        var version: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Accounts held before the cache is dropped and starts over.
    let capacity: Int

    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// The account's cached defaults, and the version a miss passes back to ``store``.
    func lookup(accountID: String) -> (defaults: CallDefaults?, version: UInt64) {
        state.withLock { ($0.entries[accountID], $0.version) }
    }

    /// Keeps `defaults` unless any account's defaults were written since `version` was read.
    func store(_ defaults: CallDefaults, accountID: String, ifVersion version: UInt64) {
        state.withLock { state in
            guard state.version == version else { return }
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[accountID] = defaults
        }
    }

    /// Forgets the account's defaults; called after each write to them and when it is deleted.
    func invalidate(accountID: String) {
        state.withLock { state in
            state.version &+= 1
            state.entries[accountID] = nil
        }
    }
}
