import Foundation
import Logging
import PostgresNIO
import RingRelayCore
import RingRelayWire

/// The ``ClusterBus`` of instances sharing a PostgreSQL database: `NOTIFY` on one channel,
/// heard by every instance's `LISTEN` connection.
///
/// A notice is a small JSON payload (well under PostgreSQL's 8,000-byte limit) naming the
/// instance that sent it, so an instance skips its own. Notifications sent while a listener is
/// disconnected are lost to it: after every (re)connection it delivers
/// ``ClusterDelivery/resynchronize`` first. PostgreSQL delivers notifications in commit order,
/// so each instance hears them in the order they were published.
public struct PostgresClusterBus: Cluster {
    /// The notification channel.
    static let channel = "ringrelay_cluster"

    private let store: PostgresStore
    private let logger: Logger
    /// This instance, as its notices and the directory name it.
    public let instanceID = UUID().uuidString
    public var hasPeers: Bool { true }
    /// How long an instance may stay silent before its devices count as gone.
    static let staleAfterMilliseconds = 10_000
    /// How long a silent instance's records are kept before they are removed.
    static let removedAfterMilliseconds = 60_000
    /// The database's clock, in milliseconds: instances' own clocks need not agree.
    static let now = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"
    /// The longest pause between attempts to listen again.
    private let maximumBackoff: Duration
    /// This instance's notices on their way back to its own listener: how far behind the bus runs.
    private let roundTrips = NoticeRoundTrips()
    /// Notices this version cannot read (another version's, during an upgrade), logged once a minute.
    private let unreadable = RateLimitedLog()

    init(store: PostgresStore, logger: Logger, maximumBackoff: Duration = .seconds(5)) {
        self.store = store
        self.logger = logger
        self.maximumBackoff = maximumBackoff
    }

    /// A notice on the channel: a header, then the notice as JSON.
    ///
    ///     rr2 <from> <seq or -> <to or *> {…}
    ///
    /// The header says who sent it (its number, heard back by its own listener, measures ``lag``)
    /// and which instance it is for (a relayed ring, its answer; `*` for all), so a listener skips
    /// its own notices and those for another instance without decoding them: decoding every notice
    /// was 8 % of an instance's CPU at 300 calls a second across three.
    struct Wire: Equatable {
        static let version = "rr2"
        var from: Substring
        var seq: UInt64?
        var to: Substring?
        var body: Substring

        static func text(from: String, seq: UInt64?, to: String?, body: String) -> String {
            "\(version) \(from) \(seq.map(String.init) ?? "-") \(to ?? "*") \(body)"
        }

        /// The header and body of `payload`; `nil` when it has no header of this version.
        init?(_ payload: String) {
            let parts = payload.split(separator: " ", maxSplits: 4, omittingEmptySubsequences: false)
            guard parts.count == 5, parts[0] == Self.version else { return nil }
            from = parts[1]
            seq = UInt64(parts[2])
            to = parts[3] == "*" ? nil : parts[3]
            body = parts[4]
        }
    }

    public var lag: Duration { roundTrips.lag }

    public func publish(_ notice: ClusterNotice) async throws {
        try await publish(contentsOf: [notice])
    }

    /// Up to ``noticesPerStatement`` notices in one statement: one round trip, and one commit.
    public func publish(contentsOf notices: [ClusterNotice]) async throws {
        let encoder = JSONEncoder()
        for start in stride(from: 0, to: notices.count, by: Self.noticesPerStatement) {
            let chunk = notices[start..<min(notices.count, start + Self.noticesPerStatement)]
            var numbers: [UInt64] = []
            var binds = PostgresBindings(capacity: chunk.count + 1)
            binds.append(Self.channel)
            do {
                for notice in chunk {
                    let seq = roundTrips.sending()
                    if let seq { numbers.append(seq) }
                    let body = String(decoding: try encoder.encode(notice), as: UTF8.self)
                    binds.append(Wire.text(from: instanceID, seq: seq, to: notice.addressee, body: body))
                }
                let calls = (2...chunk.count + 1).map { "pg_notify($1, $\($0))" }.joined(separator: ", ")
                _ = try await store.rows(PostgresQuery(unsafeSQL: "SELECT \(calls)", binds: binds))
            } catch {
                for seq in numbers { roundTrips.settled(seq) }
                throw error
            }
        }
    }

    /// Notices sent in one statement at most (each is at most ~6 KB).
    static let noticesPerStatement = 100

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
            defer {
                roundTrips.listening(false)
                connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
            }
            try await connection.listen(on: Self.channel) { notifications in
                listening()
                roundTrips.listening(true)
                // Anything sent before LISTEN took effect was missed.
                await receive(.resynchronize)
                let decoder = JSONDecoder()
                for try await notification in notifications {
                    guard let wire = Wire(notification.payload) else {
                        unreadable.warning("an unreadable cluster notice was skipped (from another version of RingRelay?)", metadata: [:], logger: logger)
                        continue
                    }
                    guard wire.from != instanceID else {
                        if let seq = wire.seq { roundTrips.settled(seq) }
                        continue
                    }
                    if let to = wire.to, to != instanceID { continue }
                    guard let notice = try? decoder.decode(ClusterNotice.self, from: Data(wire.body.utf8)) else {
                        unreadable.warning("an unreadable cluster notice was skipped (from another version of RingRelay?)", metadata: [:], logger: logger)
                        continue
                    }
                    await receive(.notice(notice))
                }
            }
        } onCancel: {
            connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
        }
    }
}

// MARK: - The directory

extension PostgresClusterBus {
    public func connected(_ device: LiveDeviceAddress, connection: UInt64) async throws {
        _ = try await store.rows(
            """
            INSERT INTO live_devices (account_id, identity, device_id, instance_id, connection, connected_at)
            VALUES (\(device.accountID), \(device.identity), \(device.deviceID), \(instanceID), \(Int64(connection)), \(unescaped: Self.now))
            ON CONFLICT (account_id, identity, device_id) DO UPDATE SET
                instance_id = excluded.instance_id, connection = excluded.connection, connected_at = excluded.connected_at
            """)
    }

    public func disconnected(_ device: LiveDeviceAddress, connection: UInt64) async throws {
        _ = try await store.rows(
            """
            DELETE FROM live_devices WHERE account_id = \(device.accountID) AND identity = \(device.identity)
                AND device_id = \(device.deviceID) AND instance_id = \(instanceID) AND connection = \(Int64(connection))
            """)
    }

    enum RemoteDevices: PreparedText {
        static func query(accountID: String, identity: String, instanceID: String) -> PostgresQuery {
            """
            SELECT d.device_id, d.instance_id FROM live_devices AS d JOIN cluster_instances AS i ON i.id = d.instance_id
            WHERE d.account_id = \(accountID) AND d.identity = \(identity) AND d.instance_id <> \(instanceID)
                AND i.seen_at > \(unescaped: PostgresClusterBus.now) - \(PostgresClusterBus.staleAfterMilliseconds)
            """
        }
        static let sql = query(accountID: "", identity: "", instanceID: "").sql
    }

    public func remoteDevices(accountID: String, identity: String) async throws -> [String: String] {
        let rows = try await store.rows(
            Prepared<RemoteDevices>(RemoteDevices.query(accountID: accountID, identity: identity, instanceID: instanceID)))
        var devices: [String: String] = [:]
        for row in rows { devices[try row.string("device_id")] = try row.string("instance_id") }
        return devices
    }

    public func heartbeat() async throws {
        _ = try await store.rows(
            """
            INSERT INTO cluster_instances (id, seen_at) VALUES (\(instanceID), \(unescaped: Self.now))
            ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at
            """)
        // Events nobody can still be waiting for.
        _ = try await store.rows("DELETE FROM live_events WHERE expires_at < \(unescaped: Self.now) - \(Self.removedAfterMilliseconds)")
        // Whoever beats first after an instance died removes what it left.
        _ = try await store.rows(
            """
            WITH gone AS (DELETE FROM cluster_instances WHERE seen_at < \(unescaped: Self.now) - \(Self.removedAfterMilliseconds) RETURNING id)
            DELETE FROM live_devices WHERE instance_id IN (SELECT id FROM gone)
            """)
    }

    public func leave() async throws {
        _ = try await store.rows("DELETE FROM live_devices WHERE instance_id = \(instanceID)")
        _ = try await store.rows("DELETE FROM cluster_instances WHERE id = \(instanceID)")
    }
}

// MARK: - Kept events

extension PostgresClusterBus {
    public func keepEvents(_ events: [KeptLiveEvent]) async throws {
        for start in stride(from: 0, to: events.count, by: 500) {
            let chunk = events[start..<min(events.count, start + 500)]
            var binds = PostgresBindings(capacity: chunk.count * 10)
            var rows: [String] = []
            for event in chunk {
                let first = binds.count + 1
                rows.append("(" + (first..<first + 10).map { "$\($0)" }.joined(separator: ", ") + ")")
                binds.append(event.eventID)
                binds.append(instanceID)
                binds.append(event.device.accountID)
                binds.append(event.device.identity)
                binds.append(event.device.deviceID)
                binds.append(event.callID)
                binds.append(event.kind.rawValue)
                binds.append(event.text)
                binds.append(event.expiresAt.millis)
                binds.append(event.acknowledged)
            }
            // An account deleted meanwhile takes its devices' events with it (the foreign key):
            // only rows whose account is still there are kept.
            let sql = """
                INSERT INTO live_events (event_id, instance_id, account_id, identity, device_id, call_id, kind, text, expires_at, acknowledged)
                SELECT v.* FROM (VALUES \(rows.joined(separator: ", "))) AS v(event_id, instance_id, account_id, identity, device_id, call_id, kind, text, expires_at, acknowledged)
                WHERE EXISTS (SELECT 1 FROM accounts WHERE id = v.account_id)
                ON CONFLICT (event_id) DO NOTHING
                """
            _ = try await store.rows(PostgresQuery(unsafeSQL: sql, binds: binds))
        }
    }

    enum SettleEvents: PreparedText {
        static func query(_ eventIDs: [String]) -> PostgresQuery { "UPDATE live_events SET acknowledged = true WHERE event_id = ANY(\(eventIDs))" }
        static let sql = query([]).sql
    }

    public func settleEvents(_ eventIDs: [String]) async throws {
        guard !eventIDs.isEmpty else { return }
        _ = try await store.rows(Prepared<SettleEvents>(SettleEvents.query(eventIDs)))
    }

    public func takeOverEvents(of device: LiveDeviceAddress) async throws -> [KeptLiveEvent] {
        let rows = try await store.rows(
            """
            WITH taken AS (
                UPDATE live_events SET instance_id = \(instanceID)
                WHERE account_id = \(device.accountID) AND identity = \(device.identity) AND device_id = \(device.deviceID)
                    AND instance_id <> \(instanceID) AND expires_at > \(unescaped: Self.now)
                RETURNING seq, event_id, call_id, kind, text, expires_at, acknowledged
            )
            SELECT * FROM taken ORDER BY seq
            """)
        // An event kind this version does not know (written by a newer one) is not sent.
        return try rows.compactMap { row in
            guard let kind = CallEventType(rawValue: try row.string("kind")) else { return nil }
            return KeptLiveEvent(
                eventID: try row.string("event_id"), device: device, callID: try row.string("call_id"), kind: kind, text: try row.string("text"),
                expiresAt: try row.date("expires_at"), acknowledged: try row.boolean("acknowledged"))
        }
    }
}

extension PostgresStore {
    /// The bus of the instances sharing this store's database.
    public func clusterBus() -> PostgresClusterBus {
        PostgresClusterBus(store: self, logger: logger)
    }
}
