import Foundation
import PostgresNIO
import RingRelayCore
import RingRelayWire

extension PostgresStore {
    static let callColumns = StoreSQL.callColumns
    private static let deliveryColumns = StoreSQL.deliveryColumns

    public func createCall(_ call: Call) async throws -> CallCreation {
        try await withConnection { connection in
            // A ring group's rows go in with its call, or not at all.
            guard call.group != nil else { return try await self.insertCall(call, on: connection) }
            return try await connection.withTransaction(logger: self.logger) { connection in try await self.insertCall(call, on: connection) }
        }
    }

    /// Inserts a call (and a ring group's members) on `connection`.
    private func insertCall(_ call: Call, on connection: PostgresConnection) async throws -> CallCreation {
        // INSERT … ON CONFLICT DO NOTHING: the unique (account, source, external_id) index decides
        // which of two deliveries of one notification rings, on whichever instances they land. The
        // same statement tells whether the callee is in an accepted call.
        let inserted = try await connection.query(
            """
            WITH inserted AS (
                INSERT INTO calls (\(unescaped: Self.callColumns)) VALUES (
                    \(call.id), \(call.accountID), \(call.source.rawValue), \(call.caller), \(call.callee), \(call.state.rawValue),
                    \(call.externalID), \(call.createdAt.millis), \(call.ringDeadline.millis), \(call.updatedAt.millis), \(call.callerName),
                    \(call.media.rawValue), \(call.metadata), \(call.answeredAt?.millis), \(call.answeredBy), \(call.endedAt?.millis),
                    \(call.endReason?.rawValue), \(call.endedBy), \(call.callerAvatarURL), \(call.notifyMissed), \(call.isSealed),
                    \(call.group?.mode.rawValue), \(call.group?.storedParticipants), \(call.group?.anyRinging == true), \(call.version))
                ON CONFLICT DO NOTHING
                RETURNING account_id, callee
            )
            SELECT \(unescaped: Self.busy(account: "inserted.account_id", identity: "inserted.callee")) AS busy
            FROM inserted
            """, logger: logger
        ).collect().first?.makeRandomAccess()
        if let inserted {
            var busy: Set<String> = try inserted.boolean("busy") ? [call.callee] : []
            for (index, member) in (call.group?.members ?? []).enumerated() {
                _ = try await connection.query(
                    """
                    INSERT INTO call_members (call_id, account_id, identity, created_at, first)
                    VALUES (\(call.id), \(call.accountID), \(member.identity), \(call.createdAt.millis), \(index == 0))
                    """, logger: logger)
                guard index > 0 else { continue }
                var binds = PostgresBindings(capacity: 2)
                binds.append(call.accountID)
                binds.append(member.identity)
                let check = try await connection.query(
                    PostgresQuery(unsafeSQL: "SELECT \(Self.busy(account: "$1", identity: "$2")) AS busy", binds: binds), logger: logger
                ).collect().first?.makeRandomAccess()
                if try check?.boolean("busy") == true { busy.insert(member.identity) }
            }
            return .created(call, busy: busy)
        }
        // No provider notification to be a repeat of: the id was taken, and only a caller's own
        // choice (`callId`) can take one.
        guard let externalID = call.externalID else { throw StoreSQL.callIDTaken }
        guard
            let row = try await connection.query(
                """
                SELECT \(unescaped: Self.callColumns) FROM calls
                WHERE account_id = \(call.accountID) AND source = \(call.source.rawValue) AND external_id = \(externalID)
                """, logger: logger
            ).collect().first?.makeRandomAccess()
        else {
            throw RingRelayError(.internal, code: .storeError, "The call could not be created.")
        }
        return .existing(try Self.call(row))
    }

    /// Whether `identity` is in an accepted call: as the callee of a call to one identity, as the
    /// caller of a native call, or in a ring group's call (whose first identity, in `callee`, may
    /// not be in it).
    private static func busy(account: String, identity: String) -> String {
        """
        (EXISTS (
                SELECT 1 FROM calls AS other
                WHERE other.account_id = \(account) AND other.state = 'accepted' AND other.callee = \(identity) AND other.ring_mode IS NULL)
            OR EXISTS (
                SELECT 1 FROM calls AS other
                WHERE other.account_id = \(account) AND other.state = 'accepted' AND other.source = 'native' AND other.caller = \(identity))
            OR EXISTS (
                SELECT 1 FROM call_members AS member
                WHERE member.account_id = \(account) AND member.identity = \(identity) AND member.joined))
        """
    }

    public func call(id: String, accountID: String) async throws -> Call? {
        try await rows(Prepared<CallByID>(CallByID.query(id: id, accountID: accountID))).first.map(Self.call)
    }

    enum CallByID: PreparedText {
        static func query(id: String, accountID: String) -> PostgresQuery {
            "SELECT \(unescaped: PostgresStore.callColumns) FROM calls WHERE id = \(id) AND account_id = \(accountID)"
        }
        static let sql = query(id: "", accountID: "").sql
    }

    public func listCalls(accountID: String, query history: CallHistoryQuery) async throws -> CallHistoryPage {
        let statements = PostgresCallHistory(accountID: accountID, query: history)
        return try await withConnection { connection in
            // Where the window of calls looked at ends: the newest of the parts' window ends, so
            // every part is read completely above it.
            var windowEnd: PostgresCallHistory.Bound?
            for window in statements.windows {
                guard let row = try await connection.query(window, logger: self.logger).collect().first?.makeRandomAccess() else { continue }
                let end = PostgresCallHistory.Bound(millis: try row.integer("created_at"), id: try row.string("id"))
                if windowEnd.map({ $0 < end }) ?? true { windowEnd = end }
            }
            var calls = try await connection.query(statements.page(after: windowEnd), logger: self.logger).collect()
                .map { try Self.call($0.makeRandomAccess()) }
            // One extra row tells whether another page exists without a COUNT.
            if calls.count > history.limit {
                calls.removeLast(calls.count - history.limit)
                return CallHistoryPage(calls: calls, next: calls.last.map(CallHistoryPosition.init(after:)))
            }
            return CallHistoryPage(calls: calls, next: windowEnd.map { CallHistoryPosition(createdAt: Date(millis: $0.millis), id: $0.id) })
        }
    }

    /// The query plans of ``listCalls(accountID:query:)`` for `query`, one text per statement:
    /// the window statements' and the page's (from an arbitrary window end). Sequential scans
    /// are off while they are planned: on a small table a scan is cheaper, and the plans should
    /// show what the indexes can do for a large one. Tests check that each reads an index range,
    /// newest first, without sorting.
    package func callHistoryPlan(accountID: String, query history: CallHistoryQuery) async throws -> [String] {
        let statements = PostgresCallHistory(accountID: accountID, query: history)
        let windowEnd = statements.windows.isEmpty ? nil : PostgresCallHistory.Bound(millis: 0, id: "")
        return try await withConnection { connection in
            try await connection.withTransaction(logger: self.logger) { connection in
                _ = try await connection.query("SET LOCAL enable_seqscan = off", logger: self.logger)
                var plans: [String] = []
                for var statement in statements.windows + [statements.page(after: windowEnd)] {
                    statement.sql = "EXPLAIN " + statement.sql
                    let lines = try await connection.query(statement, logger: self.logger).collect().map { try $0.decode(String.self) }
                    plans.append(lines.joined(separator: "\n"))
                }
                return plans
            }
        }
    }

    /// How long delivery records wait before they are written, as in SQLite: a ring's planned
    /// records and their answers go out as one row each, and many rings share a statement.
    static let writeBehind: Duration = .milliseconds(20)

    public func recordDeliveries(_ deliveries: [Delivery]) {
        guard backlog.add(deliveries) else { return }
        // Records arriving until the write starts go in the same statement.
        Task {
            try? await Task.sleep(for: Self.writeBehind)
            do {
                try await deliveryWrites.withLock { try await self.writeBacklog(endingSchedule: true) }
            } catch {
                // The next record schedules another write.
                backlog.endSchedule()
                logger.error("could not record deliveries", metadata: ["error.cause": .string("\(error)")])
            }
        }
    }

    public func flushDeliveries() async throws {
        // Through the lock even when the backlog is empty: records another task drained are
        // being written under it, and are committed once it is ours.
        try await deliveryWrites.withLock { try await self.writeBacklog() }
    }

    public func deliveries(callID: String, after: String?, limit: Int) async throws -> [Delivery] {
        try await flushDeliveries()
        return try await rows(
            """
            SELECT \(unescaped: Self.deliveryColumns) FROM deliveries WHERE call_id = \(callID) AND id > \(after ?? "")
            ORDER BY id LIMIT \(limit)
            """
        ).map { row in
            Delivery(
                id: try row.string("id"), callID: try row.string("call_id"), bindingID: try row.optionalString("binding_id"),
                deviceID: try row.optionalString("device_id"), channel: PushChannel(rawValue: try row.string("channel")) ?? .apns,
                kind: try row.string("kind"), outcome: try row.string("outcome"), status: try row.optionalInteger("status"),
                reason: try row.optionalString("reason"), providerID: try row.optionalString("provider_id"),
                attempts: try row.integer("attempts"), latencyMs: try row["latency_ms"].decode(Double?.self),
                createdAt: try row.date("created_at"), completedAt: try row.optionalDate("completed_at"))
        }
    }

    /// Writes the waiting delivery records, up to 200 per statement; the caller holds
    /// ``deliveryWrites``.
    ///
    /// A chunk the database refuses (its call was deleted meanwhile, say) is retried a row at a
    /// time, so one orphan does not lose its neighbours. A database that fails (unreachable, out
    /// of space) keeps the records waiting and throws: whoever promised them on disk must not answer.
    private func writeBacklog(endingSchedule: Bool = false) async throws {
        let waiting = backlog.drain(endingSchedule: endingSchedule)
        guard !waiting.isEmpty else { return }
        var written = waiting.startIndex
        var lost = 0
        defer {
            if lost > 0 {
                logger.warning("delivery records refused; their calls are gone", metadata: ["deliveries.lost": .stringConvertible(lost)])
            }
        }
        do {
            try await withConnection { connection in
                while written < waiting.endIndex {
                    let chunk = waiting[written..<min(written + 200, waiting.endIndex)]
                    do {
                        try await self.upsert(chunk, on: connection)
                        written = chunk.endIndex
                    } catch let error as PSQLError where Self.isRefusal(error) {
                        for delivery in chunk {
                            do { try await self.upsert([delivery], on: connection) } catch let error as PSQLError where Self.isRefusal(error) { lost += 1 }
                            written += 1
                        }
                    }
                }
            }
        } catch {
            backlog.restore(waiting[written...])
            throw error
        }
    }

    /// Whether the server refused the statement for its data (SQLSTATE class 23: a constraint),
    /// rather than failing.
    private static func isRefusal(_ error: PSQLError) -> Bool {
        error.code == .server && error.serverInfo?[.sqlState]?.hasPrefix("23") == true
    }

    private func upsert(_ deliveries: some Collection<Delivery>, on connection: PostgresConnection) async throws {
        var binds = PostgresBindings(capacity: deliveries.count * 14)
        var rows: [String] = []
        for delivery in deliveries {
            let first = binds.count + 1
            rows.append("(" + (first..<first + 14).map { "$\($0)" }.joined(separator: ", ") + ")")
            binds.append(delivery.id)
            binds.append(delivery.callID)
            binds.append(delivery.bindingID)
            binds.append(delivery.deviceID)
            binds.append(delivery.channel.rawValue)
            binds.append(delivery.kind)
            binds.append(delivery.outcome)
            binds.append(delivery.status)
            binds.append(delivery.reason)
            binds.append(delivery.providerID)
            binds.append(delivery.attempts)
            binds.append(delivery.latencyMs)
            binds.append(delivery.createdAt.millis)
            binds.append(delivery.completedAt?.millis)
        }
        let sql = """
            INSERT INTO deliveries (\(Self.deliveryColumns)) VALUES \(rows.joined(separator: ", "))
            \(StoreSQL.deliveryUpsert)
            """
        _ = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
    }

    public func setCallState(id: String, accountID: String, state: CallState, at date: Date) async throws {
        _ = try await rows(
            """
            UPDATE calls SET state = \(state.rawValue), updated_at = \(date.millis), members_ringing = false, version = version + 1
            WHERE id = \(id) AND account_id = \(accountID)
            """)
    }

    public func transitionCall(_ change: CallChange) async throws -> Call? {
        try await rows(Self.transition(change)).first.map(Self.call)
    }

    public func transitionCalls(_ changes: [CallChange]) async throws -> [Call?] {
        guard changes.count > 1 else { return changes.isEmpty ? [] : [try await transitionCall(changes[0])] }
        // Rows are locked in one order, by id, whoever calls: two instances sweeping the same due
        // calls (the sweep selects them by deadline, which many calls share at a few hundred calls
        // a second) once locked them in different orders and deadlocked (40P01).
        let order = changes.indices.sorted { changes[$0].id < changes[$1].id }
        return try await withConnection { connection in
            try await connection.withTransaction(logger: self.logger) { connection in
                var changed = [Call?](repeating: nil, count: changes.count)
                for index in order {
                    let row = try await connection.query(Self.transition(changes[index]), logger: self.logger).collect().first?.makeRandomAccess()
                    changed[index] = try row.map(Self.call)
                }
                return changed
            }
        }
    }

    /// The conditional update of `change`. One statement: the WHERE clause is the rule. Of two
    /// instances accepting at once, the second waits for the first's row lock, then finds the
    /// state changed and updates nothing.
    private static func transition(_ change: CallChange) -> PostgresQuery {
        let final = change.endReason != nil ? change.at.millis : nil
        return """
            UPDATE calls SET state = \(change.to.rawValue), updated_at = \(change.at.millis), version = version + 1,
                answered_at = CASE WHEN \(change.to.rawValue) = 'accepted' THEN \(change.at.millis) ELSE answered_at END,
                answered_by = CASE WHEN \(change.to.rawValue) = 'accepted' THEN \(change.answeredBy) ELSE answered_by END,
                ended_at = COALESCE(\(final), ended_at), end_reason = COALESCE(\(change.endReason?.rawValue), end_reason),
                ended_by = COALESCE(\(change.endedBy), ended_by)
            WHERE id = \(change.id) AND account_id = \(change.accountID) AND state = ANY(\(change.from.map(\.rawValue).sorted()))
                AND (NOT \(change.beforeDeadline) OR ring_deadline > \(change.at.millis))
            RETURNING \(unescaped: Self.callColumns)
            """
    }

    public func updateCall(_ updated: Call, expectedVersion: Int) async throws -> Call? {
        let joined = updated.group?.joined.map(\.identity) ?? []
        return try await withConnection { connection in
            try await connection.withTransaction(logger: self.logger) { connection in
                // One conditional update: of two changes computed from one version, the second waits
                // for the first's row lock, then finds the version moved on and updates nothing.
                let stored = try await connection.query(
                    """
                    UPDATE calls SET state = \(updated.state.rawValue), updated_at = \(updated.updatedAt.millis),
                        answered_at = \(updated.answeredAt?.millis), answered_by = \(updated.answeredBy), ended_at = \(updated.endedAt?.millis),
                        end_reason = \(updated.endReason?.rawValue), ended_by = \(updated.endedBy),
                        participants = \(updated.group?.storedParticipants), members_ringing = \(updated.group?.anyRinging == true),
                        version = version + 1
                    WHERE id = \(updated.id) AND account_id = \(updated.accountID) AND version = \(expectedVersion)
                    RETURNING \(unescaped: Self.callColumns)
                    """, logger: self.logger
                ).collect().first?.makeRandomAccess()
                guard let stored else { return nil }
                _ = try await connection.query(
                    "UPDATE call_members SET joined = (identity = ANY(\(joined))) WHERE call_id = \(updated.id)", logger: self.logger)
                return try Self.call(stored)
            }
        }
    }

    public func expiredRingingCalls(before date: Date, limit: Int) async throws -> [Call] {
        try await rows(
            """
            (SELECT \(unescaped: Self.callColumns) FROM calls WHERE state = 'ringing' AND ring_deadline <= \(date.millis))
            UNION ALL
            (SELECT \(unescaped: Self.callColumns) FROM calls WHERE state = 'accepted' AND members_ringing AND ring_deadline <= \(date.millis))
            ORDER BY ring_deadline LIMIT \(limit)
            """
        ).map(Self.call)
    }

    /// One statement: the due rows are locked as they are chosen, and rows another sweep holds
    /// are skipped (`SKIP LOCKED`), so instances sweeping at once share the calls between them
    /// instead of waiting on each other's locks (and of the same calls, each ends once). The
    /// choice is a materialized CTE: as an `IN (…)` subquery the planner may run it again per
    /// row, and its `LIMIT` no longer bounds the update.
    public func endUnansweredCalls(at date: Date, limit: Int) async throws -> [Call] {
        let end = CallRules.unansweredEnd
        return try await rows(
            """
            WITH due AS MATERIALIZED (
                SELECT id AS due_id FROM calls WHERE state = 'ringing' AND participants IS NULL AND ring_deadline <= \(date.millis)
                ORDER BY ring_deadline LIMIT \(limit) FOR NO KEY UPDATE SKIP LOCKED
            )
            UPDATE calls SET state = \(end.state.rawValue), updated_at = \(date.millis), version = version + 1,
                ended_at = \(date.millis), end_reason = \(end.reason.rawValue)
            FROM due WHERE calls.id = due.due_id AND calls.state = 'ringing'
            RETURNING \(unescaped: Self.callColumns)
            """
        ).map(Self.call).sorted { $0.ringDeadline < $1.ringDeadline }
    }

    public func pruneCalls(createdBefore date: Date, notificationsCreatedBefore notifications: Date) async throws -> Int {
        let rows = try await rows(
            """
            WITH pruned AS (
                DELETE FROM calls WHERE created_at < \(date.millis) AND (external_id IS NULL OR created_at < \(min(date, notifications).millis))
                RETURNING 1
            )
            SELECT COUNT(*) AS n FROM pruned
            """)
        // Provider calls kept for their notification id keep nothing else past the retention.
        var cutoff = PostgresBindings()
        cutoff.append(date.millis)
        _ = try await self.rows(PostgresQuery(unsafeSQL: StoreSQL.forgetRetainedNotificationDeliveries, binds: cutoff))
        _ = try await self.rows(PostgresQuery(unsafeSQL: StoreSQL.redactRetainedNotifications, binds: cutoff))
        return try rows.first?.integer("n") ?? 0
    }

    static func call(_ row: PostgresRandomAccessRow) throws -> Call {
        guard let source = CallSource(rawValue: try row.string("source")), let state = CallState(rawValue: try row.string("state")),
            let media = CallMedia(rawValue: try row.string("media"))
        else {
            throw RingRelayError(.internal, code: .storeCorrupt, "A stored call has an unknown source, state or media.")
        }
        return Call(
            id: try row.string("id"), accountID: try row.string("account_id"), source: source, caller: try row.optionalString("caller"),
            callerName: try row.optionalString("caller_name"), callerAvatarURL: try row.optionalString("caller_avatar_url"),
            callee: try row.string("callee"), media: media, metadata: try row.optionalString("metadata"), state: state,
            externalID: try row.optionalString("external_id"), createdAt: try row.date("created_at"), ringDeadline: try row.date("ring_deadline"),
            updatedAt: try row.date("updated_at"), answeredAt: try row.optionalDate("answered_at"), answeredBy: try row.optionalString("answered_by"),
            endedAt: try row.optionalDate("ended_at"), endReason: try row.optionalString("end_reason").flatMap(CallEndReason.init(rawValue:)),
            endedBy: try row.optionalString("ended_by"), notifyMissed: try row["notify_missed"].decode(Bool?.self),
            isSealed: try row.boolean("sealed"),
            group: try row.optionalString("ring_mode").map { mode in
                guard let mode = RingMode(rawValue: mode) else {
                    throw RingRelayError(.internal, code: .storeCorrupt, "A stored ring group has an unknown mode.")
                }
                return try RingGroup(mode: mode, storedParticipants: try row.optionalString("participants") ?? "[]")
            },
            version: try row.integer("version"))
    }
}
