import Foundation
import Logging
import RingRelayCore
import ServiceLifecycle

/// Ends rings whose time is up (`call.missed` / `call.ended` `unanswered`), tidies the live hub and
/// reports the live connections and the deliveries in flight.
///
/// It reads the store rather than keeping timers, so rings survive a restart and several
/// instances sharing a database agree: the conditional update lets exactly one of them end a call.
struct RingTimeoutSweeper: Service, DescribedByNameOnly {
    let calls: CallService
    let hub: LiveHub
    let executor: RingExecutor
    let metrics: ServerMetrics
    let logger: Logger
    /// Time between sweeps: how late a missed call can be reported.
    var interval: Duration = .milliseconds(250)

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            var sweeps = 0
            while !Task.isCancelled {
                do {
                    // A full batch means more are due: sweep again at once.
                    while try await calls.expireDue() >= 500 {}
                } catch where error.isShutdown {
                    return
                } catch {
                    logger.warning("could not sweep unanswered calls", metadata: ["error.cause": .string("\(error)")])
                }
                sweeps += 1
                if sweeps % 40 == 0 { hub.prune() }
                metrics.recordLiveConnections(hub.connectionCount)
                metrics.recordDeliveriesInFlight(executor.inFlightCount)
                try await Task.sleep(for: interval)
            }
        }
    }
}
