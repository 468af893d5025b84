/// SQL that both store engines (SQLite and PostgreSQL) write alike: the columns of the tables
/// whose rows they read into the same values, and the clauses whose rules must not drift apart.
package enum StoreSQL {
    /// What both engines answer when a new call's id is taken: a native call whose caller chose
    /// its id (`callId`) chose one that exists, in this account or another. The server's own ids
    /// never collide (80 random bits a millisecond).
    package static let callIDTaken = RingRelayError(
        .conflict, code: .callIdTaken, "A call with this callId exists already; choose another (or leave callId out).")

    /// Devices whose last binding was removed, and when: their access tokens issued before then
    /// are refused. `device_id` `''` (``everyDevice``) stands for every device of the identity.
    package static let signedOutDevicesTable = """
        CREATE TABLE signed_out_devices (
            account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
            identity TEXT NOT NULL,
            device_id TEXT NOT NULL,
            signed_out_at BIGINT NOT NULL,
            PRIMARY KEY (account_id, identity, device_id)
        )
        """

    /// Provider calls past the retention but inside the day their notification id is kept for:
    /// everything but what routes a replay to the call (ids, callee, state, times) is cleared.
    /// Binds: the retention's cut-off twice (milliseconds).
    package static let redactRetainedNotifications = """
        UPDATE calls SET caller = NULL, caller_name = NULL, caller_avatar_url = NULL, metadata = NULL, answered_by = NULL, ended_by = NULL
        WHERE created_at < $1 AND external_id IS NOT NULL
            AND (caller IS NOT NULL OR caller_name IS NOT NULL OR caller_avatar_url IS NOT NULL OR metadata IS NOT NULL
                OR answered_by IS NOT NULL OR ended_by IS NOT NULL)
        RETURNING id
        """

    /// The delivery records of those calls (which device was rung, when, how it answered).
    /// Binds: the retention's cut-off (milliseconds).
    package static let forgetRetainedNotificationDeliveries = """
        DELETE FROM deliveries WHERE call_id IN (SELECT id FROM calls WHERE created_at < $1 AND external_id IS NOT NULL)
        """

    /// The device id that stands for every device of an identity in `signed_out_devices`.
    package static let everyDevice = ""

    /// When a device was last signed out, on its own or with its whole identity.
    /// Binds: the account, the identity, the device id.
    package static let lastSignOut = """
        SELECT max(signed_out_at) AS at FROM signed_out_devices
        WHERE account_id = $1 AND identity = $2 AND device_id IN ($3, '\(everyDevice)')
        """

    /// The calls table's columns, in the order the stores bind and read them.
    package static let callColumns = """
        id, account_id, source, caller, callee, state, external_id, created_at, ring_deadline, updated_at, caller_name, media, metadata, \
        answered_at, answered_by, ended_at, end_reason, ended_by, caller_avatar_url, notify_missed, sealed, ring_mode, participants, \
        members_ringing, version
        """

    /// The deliveries table's columns.
    package static let deliveryColumns =
        "id, call_id, binding_id, device_id, channel, kind, outcome, status, reason, provider_id, attempts, latency_ms, created_at, completed_at"

    /// The bindings table's columns.
    package static let bindingColumns = """
        id, account_id, identity, type, token, environment, environment_explicit, device_id, public_key, status, invalid_reason, \
        invalidated_at, registered_at, created_at, updated_at
        """

    /// What registering a token that exists does to its binding: it moves to the new identity and
    /// device, and is active again.
    package static let bindingUpsert = """
        ON CONFLICT (account_id, type, token) DO UPDATE SET
            identity = excluded.identity,
            environment = excluded.environment,
            environment_explicit = excluded.environment_explicit,
            device_id = excluded.device_id,
            public_key = excluded.public_key,
            status = 'active',
            invalid_reason = NULL,
            invalidated_at = NULL,
            registered_at = excluded.registered_at,
            updated_at = excluded.updated_at
        """

    /// What recording a delivery again does: its answer replaces the planned record.
    package static let deliveryUpsert = """
        ON CONFLICT (id) DO UPDATE SET outcome = excluded.outcome, status = excluded.status, reason = excluded.reason,
            provider_id = excluded.provider_id, attempts = excluded.attempts, latency_ms = excluded.latency_ms,
            completed_at = excluded.completed_at
        """
}
