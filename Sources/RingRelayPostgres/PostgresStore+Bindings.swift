import Foundation
import PostgresNIO
import RingRelayCore

extension PostgresStore {
    static let bindingColumns = StoreSQL.bindingColumns

    public func upsertBinding(_ registration: BindingRegistration, newID: String, now: Date, room: BindingRoom) async throws -> BindingUpsert? {
        // One statement: the unique (account_id, type, token) index decides between insert and
        // update atomically, so two registrations of one token, on any instances, make one row.
        // The WHERE is the room: an active binding of this identity re-registered always goes
        // through; anything else only while the identity has fewer active bindings than its
        // limit, and a token the account does not have only while the account has room. (Two
        // instances registering for one identity at once may each see room for one: the limit can
        // be passed by the registrations in flight, never by more.)
        let rows = try await rows(
            """
            INSERT INTO bindings (\(unescaped: Self.bindingColumns))
            SELECT \(newID), \(registration.accountID), \(registration.identity), \(registration.type.rawValue), \(registration.token),
                \(registration.environment?.rawValue), \(registration.environmentIsExplicit), \(registration.deviceID), \(registration.publicKey),
                'active', NULL, NULL, \(now.millis), \(now.millis), \(now.millis)
            WHERE EXISTS (
                    SELECT 1 FROM bindings WHERE account_id = \(registration.accountID) AND type = \(registration.type.rawValue)
                        AND token = \(registration.token) AND identity = \(registration.identity) AND status = 'active')
                OR ((SELECT COUNT(*) FROM bindings
                        WHERE account_id = \(registration.accountID) AND identity = \(registration.identity) AND status = 'active') < \(room.perIdentity)
                    AND (\(room.accountHasRoom) OR EXISTS (
                        SELECT 1 FROM bindings WHERE account_id = \(registration.accountID) AND type = \(registration.type.rawValue)
                            AND token = \(registration.token))))
            \(unescaped: StoreSQL.bindingUpsert)
            RETURNING \(unescaped: Self.bindingColumns)
            """)
        guard let row = rows.first else { return nil }
        let binding = try Self.binding(row)
        return BindingUpsert(binding: binding, created: binding.id == newID)
    }

    public func bindingCount(accountID: String) async throws -> Int {
        try await rows("SELECT COUNT(*) AS n FROM bindings WHERE account_id = \(accountID)").first?.integer("n") ?? 0
    }

    public func binding(id: String, accountID: String, identity: String?) async throws -> Binding? {
        try await rows(
            """
            SELECT \(unescaped: Self.bindingColumns) FROM bindings
            WHERE id = \(id) AND account_id = \(accountID) AND (\(identity)::text IS NULL OR identity = \(identity))
            """
        ).first.map(Self.binding)
    }

    public func listBindings(accountID: String, query: BindingQuery) async throws -> Page<Binding> {
        // Filters left out are NULL; each statement is planned with its values, so a NULL filter
        // costs nothing.
        var items = try await rows(
            """
            SELECT \(unescaped: Self.bindingColumns) FROM bindings
            WHERE account_id = \(accountID)
                AND (\(query.identity)::text IS NULL OR identity = \(query.identity))
                AND (\(query.type?.rawValue)::text IS NULL OR type = \(query.type?.rawValue))
                AND (\(query.status?.rawValue)::text IS NULL OR status = \(query.status?.rawValue))
                AND (\(query.after)::text IS NULL OR id > \(query.after))
            ORDER BY id LIMIT \(query.limit + 1)
            """
        ).map(Self.binding)
        // One extra row tells whether another page exists without a COUNT.
        var next: String?
        if items.count > query.limit {
            items.removeLast()
            next = items.last?.id
        }
        return Page(items: items, nextAfter: next)
    }

    enum ActiveBindings: PreparedText {
        static func query(accountID: String, identity: String) -> PostgresQuery {
            """
            SELECT \(unescaped: PostgresStore.bindingColumns) FROM bindings
            WHERE account_id = \(accountID) AND identity = \(identity) AND status = 'active' ORDER BY id
            """
        }
        static let sql = query(accountID: "", identity: "").sql
    }

    public func activeBindings(accountID: String, identity: String) async throws -> [Binding] {
        // Read every time: another instance may have changed them a moment ago.
        try await rows(Prepared<ActiveBindings>(ActiveBindings.query(accountID: accountID, identity: identity))).map(Self.binding)
    }

    public func deleteBinding(id: String, accountID: String, identity: String?) async throws -> Bool {
        try await !rows(
            """
            DELETE FROM bindings WHERE id = \(id) AND account_id = \(accountID) AND (\(identity)::text IS NULL OR identity = \(identity))
            RETURNING id
            """
        ).isEmpty
    }

    public func deleteBindings(accountID: String, identity: String) async throws -> Int {
        try await rows("DELETE FROM bindings WHERE account_id = \(accountID) AND identity = \(identity) RETURNING id").count
    }

    public func signOutDevices(accountID: String, identity: String, deviceIDs: [String]?, at date: Date) async throws {
        for deviceID in deviceIDs ?? [StoreSQL.everyDevice] {
            _ = try await rows(
                """
                INSERT INTO signed_out_devices (account_id, identity, device_id, signed_out_at) VALUES (\(accountID), \(identity), \(deviceID), \(date.millis))
                ON CONFLICT (account_id, identity, device_id) DO UPDATE SET signed_out_at = GREATEST(signed_out_devices.signed_out_at, EXCLUDED.signed_out_at)
                """)
        }
    }

    public func signedOut(accountID: String, identity: String, deviceID: String) async throws -> Date? {
        var binds = PostgresBindings(capacity: 3)
        for value in [accountID, identity, deviceID] { binds.append(value) }
        return try await rows(PostgresQuery(unsafeSQL: StoreSQL.lastSignOut, binds: binds)).first?.optionalDate("at")
    }

    public func forgetSignOuts(before date: Date) async throws -> Int {
        try await rows("DELETE FROM signed_out_devices WHERE signed_out_at < \(date.millis) RETURNING account_id").count
    }

    public func invalidateBinding(id: String, accountID: String, reason: String, at date: Date, invalidSince: Date?) async throws -> Binding? {
        // One conditional statement: a re-registration that lands between the push service's
        // answer and this update wins, because it moves registered_at past the timestamp.
        let changed = try await rows(
            """
            UPDATE bindings SET status = 'invalid', invalid_reason = \(reason), invalidated_at = \(date.millis), updated_at = \(date.millis)
            WHERE id = \(id) AND account_id = \(accountID) AND (\(invalidSince?.millis)::bigint IS NULL OR registered_at <= \(invalidSince?.millis))
            RETURNING \(unescaped: Self.bindingColumns)
            """)
        if let row = changed.first { return try Self.binding(row) }
        return try await binding(id: id, accountID: accountID, identity: nil)
    }

    public func bindingCounts() async throws -> [BindingCount] {
        // Kept by triggers on every binding change (see the migration): a few rows, never a scan.
        try await rows("SELECT type, status, n FROM binding_counts WHERE n > 0").compactMap { row in
            guard let type = BindingType(rawValue: try row.string("type")), let status = BindingStatus(rawValue: try row.string("status"))
            else { return nil }
            return BindingCount(type: type, status: status, count: try row.integer("n"))
        }
    }

    private static func binding(_ row: PostgresRandomAccessRow) throws -> Binding {
        guard let type = BindingType(rawValue: try row.string("type")), let status = BindingStatus(rawValue: try row.string("status")) else {
            throw RingRelayError(.internal, code: .storeCorrupt, "A stored binding has an unknown type or status.")
        }
        return Binding(
            id: try row.string("id"), accountID: try row.string("account_id"), identity: try row.string("identity"), type: type,
            token: try row.string("token"), environment: try row.optionalString("environment").flatMap(PushEnvironment.init),
            environmentIsExplicit: try row.boolean("environment_explicit"), deviceID: try row.optionalString("device_id"),
            publicKey: try row.optionalString("public_key"), status: status, invalidReason: try row.optionalString("invalid_reason"),
            invalidatedAt: try row.optionalDate("invalidated_at"), registeredAt: try row.date("registered_at"),
            createdAt: try row.date("created_at"), updatedAt: try row.date("updated_at"))
    }
}
