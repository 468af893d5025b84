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

/// Values read from the file, by key, so a hot path does not read them again: unrevoked API keys
/// by secret hash (every authenticated request), each account's call defaults (every missed call).
///
/// Each write that concerns them drops the entries concerned and bumps the generation. A lookup
/// that read its value from disk before such a write cannot put it back afterwards:
/// ``store(_:for:ifGeneration:)`` keeps the value only while the generation is still the one the
/// miss saw, so a revoked key or changed defaults hold from the next read, whatever the
/// interleaving. Bounded by ``capacity`` (past it the cache starts over) and, when given, by
/// ``maxAge``, after which a value is read again.
final class GenerationCache<Value: Sendable>: Sendable {
    private struct Entry {
        var value: Value
        var storedAt: ContinuousClock.Instant
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Entries held before the cache is dropped and starts over.
    let capacity: Int
    /// How long an entry is used; `nil` until a write drops it.
    let maxAge: Duration?

    init(capacity: Int = 10_000, maxAge: Duration? = nil) {
        self.capacity = capacity
        self.maxAge = maxAge
    }

    /// The cached value and the current generation, which a miss passes back to ``store(_:for:ifGeneration:)``.
    func lookup(_ key: String) -> (value: Value?, generation: UInt64) {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard let entry = state.entries[key], maxAge.map({ now - entry.storedAt < $0 }) ?? true else { return (nil, state.generation) }
            return (entry.value, state.generation)
        }
    }

    /// Keeps `value` for `key` unless anything was forgotten since `generation` was read.
    func store(_ value: Value, for key: String, ifGeneration generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[key] = Entry(value: value, storedAt: .now)
        }
    }

    /// Drops the entries `shouldForget` names (by key and value); called after the write is in the database.
    func forget(where shouldForget: (String, Value) -> Bool) {
        state.withLock { state in
            state.generation &+= 1
            state.entries = state.entries.filter { !shouldForget($0.key, $0.value.value) }
        }
    }

    /// Drops `key`'s entry; called after the write is in the database.
    func forget(_ key: String) {
        state.withLock { state in
            state.generation &+= 1
            state.entries[key] = nil
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
