import Dispatch

/// Where the SDK runs the app's callbacks (``Call/onConnected`` and the rest).
///
/// Callbacks never run on an arbitrary thread: they run on this executor, in the order they were
/// scheduled. The default is the main queue, which on Apple platforms is the main actor's executor,
/// so a callback may use `MainActor.assumeIsolated { … }` to touch UI state.
public protocol CallbackExecutor: Sendable {
    /// Runs `work` later, after every job scheduled before it.
    func execute(_ work: @escaping @Sendable () -> Void)
}

extension DispatchQueue: CallbackExecutor {
    /// Runs `work` asynchronously on this queue.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        async(execute: work)
    }
}
