import RingRelayCore
/// One versioned change of the PostgreSQL schema. Versions only grow; a shipped migration is
/// never edited. (PostgreSQL has its own history, apart from SQLite's: it starts at the schema
/// SQLite reached in nine steps.)
package struct PostgresMigration: Sendable {
    /// Strictly increasing version number.
    var version: Int
    /// What the migration does, recorded in `schema_migrations`.
    var name: String
    /// Statements run in one transaction.
    var statements: [String]
}

extension PostgresMigration {
    /// The newest version this binary knows.
    package static var latest: Int { all.map(\.version).max() ?? 0 }

    /// The schema history.
    ///
    /// The tables and columns are SQLite's, so both engines answer alike: times are `BIGINT`
    /// milliseconds since the Unix epoch, flags are `BOOLEAN`. Ids are `COLLATE "C"`: keyset
    /// pages compare them byte by byte, as SQLite does, whatever the database's locale.
    package static let all: [PostgresMigration] = [
        PostgresMigration(
            version: 1, name: "accounts, keys, credentials, bindings, settings, calls, deliveries",
            statements: [
                """
                CREATE TABLE accounts (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE api_keys (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    secret_hash TEXT NOT NULL UNIQUE,
                    hint TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    revoked_at BIGINT
                )
                """,
                "CREATE INDEX api_keys_account ON api_keys(account_id)",
                """
                CREATE TABLE account_call_defaults (
                    account_id TEXT COLLATE "C" PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                    if_busy TEXT NOT NULL,
                    notify_missed BOOLEAN NOT NULL DEFAULT false
                )
                """,
                """
                CREATE TABLE credentials (
                    account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    kind TEXT COLLATE "C" NOT NULL,
                    payload TEXT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    PRIMARY KEY (account_id, kind)
                )
                """,
                """
                CREATE TABLE bindings (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    identity TEXT NOT NULL,
                    type TEXT NOT NULL,
                    token TEXT NOT NULL,
                    environment TEXT,
                    environment_explicit BOOLEAN NOT NULL DEFAULT false,
                    device_id TEXT,
                    public_key TEXT,
                    status TEXT NOT NULL,
                    invalid_reason TEXT,
                    invalidated_at BIGINT,
                    registered_at BIGINT NOT NULL,
                    created_at BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    UNIQUE (account_id, type, token)
                )
                """,
                "CREATE INDEX bindings_account_identity ON bindings(account_id, identity, id)",
                // /metrics reads these few rows instead of counting every binding on each scrape.
                // Statement triggers keep them in the same transaction as the change, cascades
                // included, one upsert per (type, status) in key order: concurrent changes take
                // the rows' locks in the same order and never deadlock.
                """
                CREATE TABLE binding_counts (
                    type TEXT COLLATE "C" NOT NULL,
                    status TEXT COLLATE "C" NOT NULL,
                    n BIGINT NOT NULL,
                    PRIMARY KEY (type, status)
                )
                """,
                // A transition table exists only for the events that have it (no old rows for an
                // insert), so each event reads its own.
                """
                CREATE FUNCTION binding_counts_follow() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP = 'INSERT' THEN
                        INSERT INTO binding_counts AS counts (type, status, n)
                        SELECT type, status, COUNT(*) FROM new_rows GROUP BY type, status ORDER BY type, status
                        ON CONFLICT (type, status) DO UPDATE SET n = counts.n + excluded.n;
                    ELSIF TG_OP = 'DELETE' THEN
                        INSERT INTO binding_counts AS counts (type, status, n)
                        SELECT type, status, -COUNT(*) FROM old_rows GROUP BY type, status ORDER BY type, status
                        ON CONFLICT (type, status) DO UPDATE SET n = counts.n + excluded.n;
                    ELSE
                        INSERT INTO binding_counts AS counts (type, status, n)
                        SELECT type, status, SUM(change) FROM (
                            SELECT type, status, 1 AS change FROM new_rows
                            UNION ALL SELECT type, status, -1 FROM old_rows
                        ) AS changes
                        GROUP BY type, status HAVING SUM(change) <> 0 ORDER BY type, status
                        ON CONFLICT (type, status) DO UPDATE SET n = counts.n + excluded.n;
                    END IF;
                    RETURN NULL;
                END
                $$
                """,
                """
                CREATE TRIGGER binding_counts_insert AFTER INSERT ON bindings
                REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION binding_counts_follow()
                """,
                """
                CREATE TRIGGER binding_counts_update AFTER UPDATE ON bindings
                REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION binding_counts_follow()
                """,
                """
                CREATE TRIGGER binding_counts_delete AFTER DELETE ON bindings
                REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION binding_counts_follow()
                """,
                """
                CREATE TABLE settings (
                    name TEXT PRIMARY KEY,
                    value BYTEA NOT NULL
                )
                """,
                """
                CREATE TABLE calls (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    source TEXT NOT NULL,
                    caller TEXT,
                    callee TEXT NOT NULL,
                    state TEXT NOT NULL,
                    external_id TEXT,
                    created_at BIGINT NOT NULL,
                    ring_deadline BIGINT NOT NULL,
                    updated_at BIGINT NOT NULL,
                    caller_name TEXT,
                    caller_avatar_url TEXT,
                    media TEXT NOT NULL,
                    metadata TEXT,
                    answered_at BIGINT,
                    answered_by TEXT,
                    ended_at BIGINT,
                    end_reason TEXT,
                    ended_by TEXT,
                    notify_missed BOOLEAN,
                    sealed BOOLEAN NOT NULL DEFAULT false
                )
                """,
                // A provider's notification id rings once per account: the unique index is the check.
                "CREATE UNIQUE INDEX calls_external ON calls(account_id, source, external_id) WHERE external_id IS NOT NULL",
                "CREATE INDEX calls_created ON calls(created_at)",
                // The ring-timeout sweep and the busy check read only live calls.
                "CREATE INDEX calls_ringing ON calls(ring_deadline) WHERE state = 'ringing'",
                "CREATE INDEX calls_accepted_callee ON calls(account_id, callee) WHERE state = 'accepted'",
                "CREATE INDEX calls_accepted_caller ON calls(account_id, caller) WHERE state = 'accepted' AND source = 'native'",
                // GET /v1/calls reads one range of one of these, newest first.
                "CREATE INDEX calls_account_history ON calls(account_id, created_at, id)",
                "CREATE INDEX calls_callee_history ON calls(account_id, callee, created_at, id)",
                "CREATE INDEX calls_caller_history ON calls(account_id, caller, created_at, id) WHERE source = 'native'",
                """
                CREATE TABLE deliveries (
                    id TEXT COLLATE "C" PRIMARY KEY,
                    call_id TEXT COLLATE "C" NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
                    binding_id TEXT,
                    device_id TEXT,
                    channel TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    outcome TEXT NOT NULL,
                    status BIGINT,
                    reason TEXT,
                    provider_id TEXT,
                    attempts BIGINT NOT NULL,
                    latency_ms DOUBLE PRECISION,
                    created_at BIGINT NOT NULL,
                    completed_at BIGINT
                )
                """,
                "CREATE INDEX deliveries_call ON deliveries(call_id, id)",
            ]),
        PostgresMigration(
            version: 2, name: "ring groups",
            statements: [
                // A ring group's call row keeps its first identity in `callee` and every identity's
                // part as JSON in `participants`; `version` orders its changes (compare-and-set).
                "ALTER TABLE calls ADD COLUMN ring_mode TEXT",
                "ALTER TABLE calls ADD COLUMN participants TEXT",
                "ALTER TABLE calls ADD COLUMN members_ringing BOOLEAN NOT NULL DEFAULT false",
                "ALTER TABLE calls ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
                // One row per identity of a ring group: the history of the identities after the
                // first (the first is in calls_callee_history), and who is in a call now (busy).
                """
                CREATE TABLE call_members (
                    call_id TEXT COLLATE "C" NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
                    account_id TEXT COLLATE "C" NOT NULL,
                    identity TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    first BOOLEAN NOT NULL,
                    joined BOOLEAN NOT NULL DEFAULT false,
                    PRIMARY KEY (call_id, identity)
                )
                """,
                "CREATE INDEX call_members_history ON call_members(account_id, identity, created_at, call_id) WHERE NOT first",
                "CREATE INDEX call_members_joined ON call_members(account_id, identity) WHERE joined",
                // The ring-timeout sweep: answered groups whose other identities still ring.
                "CREATE INDEX calls_group_ringing ON calls(ring_deadline) WHERE state = 'accepted' AND members_ringing",
            ]),
        PostgresMigration(
            version: 3, name: "live directory",
            statements: [
                // Instances sharing the database, and when each last said it was alive (the
                // database's clock, so instances' clocks need not agree).
                "CREATE TABLE cluster_instances (id TEXT COLLATE \"C\" PRIMARY KEY, seen_at BIGINT NOT NULL)",
                // Which instance holds each device's live connection (its newest).
                """
                CREATE TABLE live_devices (
                    account_id TEXT COLLATE "C" NOT NULL,
                    identity TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    instance_id TEXT COLLATE "C" NOT NULL,
                    connection BIGINT NOT NULL,
                    connected_at BIGINT NOT NULL,
                    PRIMARY KEY (account_id, identity, device_id)
                )
                """,
                "CREATE INDEX live_devices_instance ON live_devices(instance_id)",
            ]),
        PostgresMigration(version: 4, name: "signed-out devices", statements: [StoreSQL.signedOutDevicesTable]),
        PostgresMigration(
            version: 5, name: "live events kept for every instance",
            statements: [
                // Each instance's events for devices, until acknowledged (or withdrawn, or
                // expired): a device that reconnects to another instance gets them from there.
                // `seq` is the one order of every instance's events.
                """
                CREATE TABLE live_events (
                    seq BIGSERIAL PRIMARY KEY,
                    event_id TEXT COLLATE "C" NOT NULL UNIQUE,
                    instance_id TEXT COLLATE "C" NOT NULL,
                    account_id TEXT COLLATE "C" NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    identity TEXT NOT NULL,
                    device_id TEXT NOT NULL,
                    call_id TEXT COLLATE "C" NOT NULL,
                    kind TEXT NOT NULL,
                    text TEXT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    acknowledged BOOLEAN NOT NULL DEFAULT false
                )
                """,
                "CREATE INDEX live_events_device ON live_events(account_id, identity, device_id, seq)",
                "CREATE INDEX live_events_expiry ON live_events(expires_at)",
            ]),
        PostgresMigration(
            version: 6, name: "account limits",
            statements: [
                // An operator's settings for one account; NULL is the server's.
                """
                CREATE TABLE account_limits (
                    account_id TEXT COLLATE "C" PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                    rate_limit DOUBLE PRECISION,
                    rate_limit_burst DOUBLE PRECISION,
                    ring_timeout_seconds INTEGER
                )
                """
            ]),
    ]
}
