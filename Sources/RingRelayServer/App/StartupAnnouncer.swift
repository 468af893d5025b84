import RingRelayCore
import ServiceLifecycle

/// Once the server listens: keeps the first start's secrets, announces them, then the address.
///
/// A service of its own, so a start that never listens (the port is taken) ends before this runs
/// and nothing is created or printed, and a failure here (the token file cannot be written) stops
/// the server as any failed service does.
struct StartupAnnouncer: Service, DescribedByNameOnly {
    let bootstrap: Bootstrap
    /// The bound port, yielded once when the server accepts connections.
    let listening: AsyncStream<Int>
    /// Prints what the first start created.
    let announce: @Sendable (Bootstrap.Created) -> Void
    /// Told the bound port, after the secrets.
    let onListening: @Sendable (Int) async -> Void

    func run() async throws {
        for await port in listening.cancelOnGracefulShutdown() {
            announce(try await bootstrap.keepSecrets())
            await onListening(port)
            return
        }
    }
}
