/// A first-come-first-served lock for async code.
///
/// An actor alone does not serialise work that suspends (actors are re-entrant), and a SQLite
/// connection must not interleave one task's transaction with another task's statements.
actor AsyncMutex {
    private var locked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` while holding the lock.
    func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if locked {
            await withCheckedContinuation { waiters.append($0) }
        } else {
            locked = true
        }
        defer { release() }
        return try await body()
    }

    private func release() {
        if waiters.isEmpty {
            locked = false
        } else {
            // Ownership passes straight to the next waiter; `locked` stays true.
            waiters.removeFirst().resume()
        }
    }
}
