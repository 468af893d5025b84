import RingRelayCore
import ServiceLifecycle
import Synchronization

/// Runs actions at the very start of a graceful shutdown.
///
/// Listed after the application in the process's service group, so it hears the shutdown first
/// (a group stops its services last to first): live connections get 1001 (going away) before the
/// HTTP server's own shutdown closes them with 1000 (normal).
public final class ShutdownNotice: Service, Sendable, DescribedByNameOnly {
    private let actions = Mutex<[@Sendable () -> Void]>([])
    private let begun = Atomic(false)

    /// Whether the shutdown has begun.
    var hasBegun: Bool { begun.load(ordering: .relaxed) }

    public init() {}

    /// Adds an action to run when the shutdown begins.
    func onShutdown(_ action: @escaping @Sendable () -> Void) {
        actions.withLock { $0.append(action) }
    }

    public func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled: the group is failing (a service threw), not shutting down.
            return
        }
        begun.store(true, ordering: .relaxed)
        for action in actions.withLock({ $0 }) { action() }
    }
}
