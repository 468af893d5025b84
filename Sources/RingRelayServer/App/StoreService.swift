import Logging
import RingRelayCore
import ServiceLifecycle

/// Keeps the store open for the life of the service group and closes it last.
///
/// Listed before the HTTP server in the group, so on SIGTERM the server drains its in-flight
/// requests first and the store closes after the last of them has committed.
struct StoreService: Service {
    let store: any DataStore
    let logger: Logger

    func run() async throws {
        try? await gracefulShutdown()
        try await store.close()
        logger.info("store closed")
    }
}
