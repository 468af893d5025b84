import Logging
import NIOCore
import PostgresNIO
import RingRelayCore
import Synchronization

/// A few connections to one PostgreSQL server, opened when needed and dropped when they fail.
///
/// Why not postgres-nio's `PostgresClient`: while its server is down it keeps requests waiting
/// (up to a minute before its circuit breaker opens) and then retries with a backoff that grows
/// to a minute. A ring service must answer 503 at once while the database is away, and serve
/// again as soon as it is back. Here a request that finds no usable connection connects itself,
/// and a refused connection fails that request at once; the next request tries again.
final class PostgresConnectionPool: Sendable {
    /// What a lease gets: an open connection, or the right to open one.
    private enum Grant: Sendable {
        case connection(PostgresConnection)
        case slot
    }

    /// A lease waiting for a connection, and since when.
    private struct Waiter {
        var continuation: CheckedContinuation<Grant, any Error>
        var since: ContinuousClock.Instant
    }

    private struct State {
        var idle: [PostgresConnection] = []
        /// Connections idle, leased or being opened.
        var open = 0
        /// Oldest first.
        var waiters = CircularBuffer<Waiter>()
        var closed = false
    }

    let configuration: PostgresConnection.Configuration
    private let maximum: Int
    private let logger: Logger
    private let state = Mutex(State())
    private let nextID = Atomic<Int>(1)

    /// - Parameters:
    ///   - configuration: where the server is and how to log in.
    ///   - maximum: connections open at most; further requests wait for one.
    ///   - logger: postgres-nio's background messages.
    init(configuration: PostgresConnection.Configuration, maximum: Int, logger: Logger) {
        self.configuration = configuration
        self.maximum = maximum
        self.logger = logger
    }

    /// Runs `body` on a connection of its own, returned to the pool afterwards (or dropped, when
    /// it closed meanwhile).
    ///
    /// - Throws: ``RingRelayError`` `store_unavailable` when no connection can be opened,
    ///   `store_closed` after ``close()``; what `body` throws.
    func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await lease()
        defer { release(connection) }
        return try await body(connection)
    }

    /// How long the oldest lease waiting for a connection has waited (zero when none waits).
    var queueDelay: Duration {
        guard let since = state.withLock({ $0.waiters.first?.since }) else { return .zero }
        return .now - since
    }

    /// Closes every connection; later leases fail.
    func close() async {
        let idle = state.withLock { state in
            state.closed = true
            defer { state.idle.removeAll() }
            let waiters = state.waiters
            state.waiters.removeAll()
            for waiter in waiters { waiter.continuation.resume(throwing: PostgresStore.closedError) }
            return state.idle
        }
        for connection in idle { try? await connection.close() }
    }

    private func lease() async throws -> PostgresConnection {
        let grant = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
            let now: Result<Grant, any Error>? = state.withLock { state in
                if state.closed { return .failure(PostgresStore.closedError) }
                while let connection = state.idle.popLast() {
                    if !connection.isClosed { return .success(.connection(connection)) }
                    state.open -= 1
                }
                if state.open < maximum {
                    state.open += 1
                    return .success(.slot)
                }
                state.waiters.append(Waiter(continuation: continuation, since: .now))
                return nil
            }
            if let now { continuation.resume(with: now) }
        }
        switch grant {
        case .connection(let connection):
            return connection
        case .slot:
            do {
                return try await PostgresConnection.connect(
                    configuration: configuration, id: nextID.wrappingAdd(1, ordering: .relaxed).oldValue, logger: logger)
            } catch {
                freeSlot()
                throw PostgresStore.unavailable(error)
            }
        }
    }

    /// Hands a connection to the next waiter, or keeps it idle; a closed one frees its slot.
    private func release(_ connection: PostgresConnection) {
        guard !connection.isClosed else { return freeSlot() }
        let (waiter, closing) = state.withLock { state -> (CheckedContinuation<Grant, any Error>?, Bool) in
            if state.closed {
                state.open -= 1
                return (nil, true)
            }
            if let waiter = state.waiters.popFirst() { return (waiter.continuation, false) }
            state.idle.append(connection)
            return (nil, false)
        }
        waiter?.resume(returning: .connection(connection))
        if closing { Self.close(connection) }
    }

    /// Closes a connection that nobody awaits; it is kept until closed (postgres-nio treats a
    /// connection released while open as a defect).
    private static func close(_ connection: PostgresConnection) {
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    deinit {
        // A store dropped without close(), on a failed start say: its connections still end.
        for connection in state.withLock({ $0.idle }) { Self.close(connection) }
    }

    /// A connection closed or could not be opened: the next waiter may open one.
    private func freeSlot() {
        let waiter = state.withLock { state -> CheckedContinuation<Grant, any Error>? in
            guard !state.closed, let waiter = state.waiters.popFirst() else {
                state.open -= 1
                return nil
            }
            return waiter.continuation
        }
        waiter?.resume(returning: .slot)
    }
}
