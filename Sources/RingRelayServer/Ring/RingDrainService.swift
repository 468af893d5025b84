import Logging
import RingRelayCore
import ServiceLifecycle

/// On shutdown, waits for deliveries still retrying in the background before the push clients
/// and the store close (it is listed after them, so it stops before them).
struct RingDrainService: Service, DescribedByNameOnly {
    let executor: RingExecutor
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        let pending = executor.inFlightCount
        if pending > 0 { logger.info("waiting for deliveries in flight", metadata: ["deliveries.pending": .stringConvertible(pending)]) }
        await executor.drain()
    }
}
