import Synchronization

/// A first-come-first-served lock for async code.
///
/// A multi-statement SQLite transaction must not interleave with another task's statements, nor
/// a read of delivery records with a write of them still in flight, and
/// an actor alone does not serialise work that suspends (actors are re-entrant). Taking a free
/// lock does not suspend; a task that finds it held waits, without blocking its thread, until
/// the holder hands the lock straight to it.
package final class AsyncMutex: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// Runs `body` while holding the lock.
    package func withLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let acquired = state.withLock { state in
            if state.locked { return false }
            state.locked = true
            return true
        }
        if !acquired {
            await withCheckedContinuation { continuation in
                // The holder may have let go since the first look.
                let now = state.withLock { state in
                    if state.locked {
                        state.waiters.append(continuation)
                        return false
                    }
                    state.locked = true
                    return true
                }
                if now { continuation.resume() }
            }
        }
        defer { release() }
        return try await body()
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            // Ownership passes straight to the next waiter; `locked` stays true.
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
