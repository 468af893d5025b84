import Synchronization

/// Values made once per key and kept, for metric handles: swift-metrics makes a handle by looking
/// its name and labels up in the registry (under the registry's lock, checking the name each
/// time), and the server did that for every request, webhook and push.
///
/// ```swift
/// let counters = HandleCache<String, Counter>()
/// counters.value(for: route) { Counter(label: "requests_total", dimensions: [("route", route)], factory: factory) }.increment()
/// ```
public final class HandleCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline let values = Mutex<[Key: Value]>([:])

    public init() {}

    /// The value kept for `key`, made by `make` the first time. Inlinable, so that callers in
    /// other modules get it specialized for their types (unspecialized, the generic metadata
    /// lookups cost as much as the cache saved).
    @inlinable
    public func value(for key: Key, make: () -> Value) -> Value {
        if let kept = values.withLock({ $0[key] }) { return kept }
        // Made outside the lock (the registry takes its own); the first one kept wins.
        let made = make()
        return values.withLock { values in
            if let kept = values[key] { return kept }
            values[key] = made
            return made
        }
    }
}
