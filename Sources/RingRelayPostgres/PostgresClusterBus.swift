import Foundation
import Logging
import PostgresNIO
import RingRelayCore

/// The ``ClusterBus`` of instances sharing a PostgreSQL database: `NOTIFY` on one channel,
/// heard by every instance's `LISTEN` connection.
///
/// A notice is a small JSON payload (well under PostgreSQL's 8,000-byte limit) naming the
/// instance that sent it, so an instance skips its own. Notifications sent while a listener is
/// disconnected are lost to it: after every (re)connection it delivers
/// ``ClusterDelivery/resynchronize`` first. PostgreSQL delivers notifications in commit order,
/// so each instance hears them in the order they were published.
public struct PostgresClusterBus: ClusterBus {
    /// The notification channel.
    static let channel = "ringrelay_cluster"

    private let store: PostgresStore
    private let logger: Logger
    /// This instance, as its notices name it.
    let instanceID = UUID().uuidString
    /// The longest pause between attempts to listen again.
    private let maximumBackoff: Duration

    init(store: PostgresStore, logger: Logger, maximumBackoff: Duration = .seconds(5)) {
        self.store = store
        self.logger = logger
        self.maximumBackoff = maximumBackoff
    }

    private struct Envelope: Codable {
        var from: String
        var notice: ClusterNotice
    }

    public func publish(_ notice: ClusterNotice) async throws {
        let payload = String(decoding: try JSONEncoder().encode(Envelope(from: instanceID, notice: notice)), as: UTF8.self)
        _ = try await store.rows("SELECT pg_notify(\(Self.channel), \(payload))")
    }

    public func listen(_ receive: @escaping @Sendable (ClusterDelivery) async -> Void) async throws {
        var backoff: Duration = .milliseconds(250)
        while !Task.isCancelled {
            do {
                try await listenOnce(receive) { backoff = .milliseconds(250) }
            } catch where !Task.isCancelled {
                logger.warning(
                    "lost the connection that hears other instances; listening again", metadata: ["error.cause": .string("\(error)")])
            }
            try await Task.sleep(for: backoff)
            backoff = min(backoff * 2, maximumBackoff)
        }
        throw CancellationError()
    }

    /// One connection's worth of listening: returns or throws when the connection ends.
    private func listenOnce(_ receive: @escaping @Sendable (ClusterDelivery) async -> Void, listening: () -> Void) async throws {
        let connection = try await PostgresConnection.connect(configuration: store.pool.configuration, id: 0, logger: logger)
        try await withTaskCancellationHandler {
            defer { connection.close().whenComplete { _ in withExtendedLifetime(connection) {} } }
            try await connection.listen(on: Self.channel) { notifications in
                listening()
                // Anything sent before LISTEN took effect was missed.
                await receive(.resynchronize)
                for try await notification in notifications {
                    guard let envelope = try? JSONDecoder().decode(Envelope.self, from: Data(notification.payload.utf8)) else {
                        logger.warning("an unreadable cluster notice was skipped")
                        continue
                    }
                    if envelope.from != instanceID { await receive(.notice(envelope.notice)) }
                }
            }
        } onCancel: {
            connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
        }
    }
}

extension PostgresStore {
    /// The bus of the instances sharing this store's database.
    public func clusterBus() -> PostgresClusterBus {
        PostgresClusterBus(store: self, logger: logger)
    }
}
