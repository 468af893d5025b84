import Foundation
import Logging
import RingRelayCore
import ServiceLifecycle

/// Deletes call records older than the retention, and device sign-outs older than any token
/// still valid, every few minutes.
struct CallPruner: Service, DescribedByNameOnly {
    let store: any DataStore
    let retention: Duration
    /// The longest an access token lives: sign-outs older than that refuse no token any more.
    let tokenLifetime: TimeInterval
    let clock: any WallClock
    let logger: Logger
    /// How long a provider call's notification id is kept, at least, against replays (24 h).
    static let notificationRetention: TimeInterval = 86_400
    /// Time between sweeps.
    var interval: Duration = .seconds(300)

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await prune()
                try await Task.sleep(for: interval)
            }
        }
    }

    /// One sweep.
    func prune() async {
        do {
            // Provider calls stay at least a day whatever the retention: their notification id is
            // what tells a replayed webhook from a new call.
            let now = clock.now
            let pruned = try await store.pruneCalls(
                createdBefore: now.addingTimeInterval(-retention.timeInterval),
                notificationsCreatedBefore: now.addingTimeInterval(-max(retention.timeInterval, Self.notificationRetention)))
            if pruned > 0 { logger.info("pruned old calls", metadata: ["calls.pruned": .stringConvertible(pruned)]) }
            // A minute's slack for clocks: a sign-out is kept until every token minted before it has expired.
            _ = try await store.forgetSignOuts(before: now.addingTimeInterval(-tokenLifetime - 60))
        } catch where error.isShutdown {
            // The server is stopping (or never started: a busy port closes the store at once).
        } catch {
            logger.warning("could not prune calls", metadata: ["error.cause": .string("\(error)")])
        }
    }
}

extension Error {
    /// Whether this error only says the server is stopping: the task was cancelled, or the store
    /// was closed under a background sweep. Not worth a warning.
    var isShutdown: Bool {
        self is CancellationError || (self as? RingRelayError)?.code == RingRelayError.Code.storeClosed.rawValue
    }
}
