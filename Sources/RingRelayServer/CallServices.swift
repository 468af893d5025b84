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

/// On shutdown, waits for deliveries still retrying in the background before the push clients
/// and the store close (it is listed after them, so it stops before them).
struct RingDrainService: Service {
    let engine: RingEngine
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        let pending = engine.inFlightCount
        if pending > 0 { logger.info("waiting for deliveries in flight", metadata: ["deliveries.pending": .stringConvertible(pending)]) }
        await engine.drain()
    }
}

/// Ends rings whose time is up (`call.missed` / `call.ended` `unanswered`) and tidies the live hub.
///
/// It reads the store rather than keeping timers, so rings survive a restart and several
/// instances sharing a database agree: the conditional update lets exactly one of them end a call.
struct RingTimeoutSweeper: Service {
    let calls: CallService
    let hub: LiveHub
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
                    while try await calls.expireDue() == 500 {}
                } catch is CancellationError {
                    return
                } catch {
                    logger.warning("could not sweep unanswered calls", metadata: ["error.cause": .string("\(error)")])
                }
                sweeps += 1
                if sweeps % 40 == 0 { hub.prune() }
                metrics.recordLiveConnections(hub.connectionCount)
                try await Task.sleep(for: interval)
            }
        }
    }
}
