import Foundation
import Logging
import RingRelayCore
import ServiceLifecycle

/// Deletes call records older than the retention, every few minutes.
struct CallPruner: Service {
    let store: any DataStore
    let retention: Duration
    let clock: any WallClock
    let logger: Logger
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
            let pruned = try await store.pruneCalls(createdBefore: clock.now.addingTimeInterval(-retention.timeInterval))
            if pruned > 0 { logger.info("pruned old calls", metadata: ["calls.pruned": .stringConvertible(pruned)]) }
        } catch {
            logger.warning("could not prune calls", metadata: ["error.cause": .string("\(error)")])
        }
    }
}
