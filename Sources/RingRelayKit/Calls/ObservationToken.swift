import Synchronization

/// Keeps one observer of a ``CallManager`` registered (``CallManager/addObserver(on:_:)``).
///
/// ``cancel()`` removes the observer, and so does letting go of the token: its `deinit` cancels.
/// Keep the token as long as you want to hear about calls, typically in a property of the object
/// that observes. After `cancel()` returns, the observer is not called again, apart from a call
/// already running on its executor.
public final class ObservationToken: Sendable {
    private let cancellation: Mutex<(@Sendable () -> Void)?>

    init(cancellation: @escaping @Sendable () -> Void) {
        self.cancellation = Mutex(cancellation)
    }

    /// Whether ``cancel()`` has run.
    public var isCancelled: Bool { cancellation.withLock { $0 == nil } }

    /// Removes the observer. Calling it again does nothing.
    public func cancel() {
        let cancel = cancellation.withLock { cancellation in
            defer { cancellation = nil }
            return cancellation
        }
        cancel?()
    }

    deinit {
        cancel()
    }
}
