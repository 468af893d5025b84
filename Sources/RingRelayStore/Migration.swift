import RingRelayCore

/// One versioned schema change. Versions only grow; a shipped migration is never edited.
struct Migration: Sendable {
    /// Strictly increasing version number.
    var version: Int
    /// What the migration does, recorded in `schema_migrations`.
    var name: String
    /// Statements run in one transaction.
    var statements: [String]
}

extension Migration {
    /// The SQLite schema history.
    static let sqlite: [Migration] = [
        Migration(
            version: 1, name: "accounts, keys, credentials, bindings, settings",
            statements: [
                """
                CREATE TABLE accounts (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    created_at INTEGER NOT NULL
                ) STRICT
                """,
                """
                CREATE TABLE api_keys (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    secret_hash TEXT NOT NULL UNIQUE,
                    hint TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    revoked_at INTEGER
                ) STRICT
                """,
                "CREATE INDEX api_keys_account ON api_keys(account_id)",
                """
                CREATE TABLE credentials (
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    kind TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    updated_at INTEGER NOT NULL,
                    PRIMARY KEY (account_id, kind)
                ) STRICT
                """,
                """
                CREATE TABLE bindings (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    identity TEXT NOT NULL,
                    type TEXT NOT NULL,
                    token TEXT NOT NULL,
                    environment TEXT,
                    device_id TEXT,
                    public_key TEXT,
                    status TEXT NOT NULL,
                    invalid_reason TEXT,
                    invalidated_at INTEGER,
                    registered_at INTEGER NOT NULL,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    UNIQUE (account_id, type, token)
                ) STRICT
                """,
                "CREATE INDEX bindings_account_identity ON bindings(account_id, identity, id)",
                """
                CREATE TABLE settings (
                    name TEXT PRIMARY KEY,
                    value BLOB NOT NULL
                ) STRICT
                """,
            ]),
        Migration(
            version: 2, name: "bindings.environment_explicit",
            statements: [
                "ALTER TABLE bindings ADD COLUMN environment_explicit INTEGER NOT NULL DEFAULT 0"
            ]),
        Migration(
            version: 3, name: "calls and deliveries",
            statements: [
                """
                CREATE TABLE calls (
                    id TEXT PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    source TEXT NOT NULL,
                    caller TEXT,
                    callee TEXT NOT NULL,
                    state TEXT NOT NULL,
                    external_id TEXT,
                    created_at INTEGER NOT NULL,
                    ring_deadline INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL
                ) STRICT
                """,
                // A provider's notification id rings once per account: the unique index is the check.
                "CREATE UNIQUE INDEX calls_external ON calls(account_id, source, external_id) WHERE external_id IS NOT NULL",
                "CREATE INDEX calls_created ON calls(created_at)",
                """
                CREATE TABLE deliveries (
                    id TEXT PRIMARY KEY,
                    call_id TEXT NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
                    binding_id TEXT NOT NULL,
                    channel TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    outcome TEXT NOT NULL,
                    status INTEGER,
                    reason TEXT,
                    provider_id TEXT,
                    attempts INTEGER NOT NULL,
                    latency_ms REAL,
                    created_at INTEGER NOT NULL,
                    completed_at INTEGER
                ) STRICT
                """,
                "CREATE INDEX deliveries_call ON deliveries(call_id, id)",
            ]),
        Migration(
            version: 4, name: "native calls and live deliveries",
            statements: [
                "ALTER TABLE calls ADD COLUMN caller_name TEXT",
                "ALTER TABLE calls ADD COLUMN media TEXT NOT NULL DEFAULT 'audio'",
                "ALTER TABLE calls ADD COLUMN metadata TEXT",
                "ALTER TABLE calls ADD COLUMN answered_at INTEGER",
                "ALTER TABLE calls ADD COLUMN answered_by TEXT",
                "ALTER TABLE calls ADD COLUMN ended_at INTEGER",
                "ALTER TABLE calls ADD COLUMN end_reason TEXT",
                "ALTER TABLE calls ADD COLUMN ended_by TEXT",
                // The ring-timeout sweep and the busy check read only live calls.
                "CREATE INDEX calls_ringing ON calls(ring_deadline) WHERE state = 'ringing'",
                "CREATE INDEX calls_accepted_callee ON calls(account_id, callee) WHERE state = 'accepted'",
                "CREATE INDEX calls_accepted_caller ON calls(account_id, caller) WHERE state = 'accepted'",
                // A live-connection delivery has a device and no binding: binding_id becomes optional.
                """
                CREATE TABLE deliveries_v4 (
                    id TEXT PRIMARY KEY,
                    call_id TEXT NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
                    binding_id TEXT,
                    device_id TEXT,
                    channel TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    outcome TEXT NOT NULL,
                    status INTEGER,
                    reason TEXT,
                    provider_id TEXT,
                    attempts INTEGER NOT NULL,
                    latency_ms REAL,
                    created_at INTEGER NOT NULL,
                    completed_at INTEGER
                ) STRICT
                """,
                """
                INSERT INTO deliveries_v4 (id, call_id, binding_id, channel, kind, outcome, status, reason, provider_id, attempts,
                    latency_ms, created_at, completed_at)
                SELECT id, call_id, binding_id, channel, kind, outcome, status, reason, provider_id, attempts, latency_ms, created_at,
                    completed_at FROM deliveries
                """,
                "DROP TABLE deliveries",
                "ALTER TABLE deliveries_v4 RENAME TO deliveries",
                "CREATE INDEX deliveries_call ON deliveries(call_id, id)",
            ]),
        Migration(
            version: 5, name: "binding counts kept by triggers",
            statements: [
                // /metrics reads these few rows instead of counting every binding on each scrape.
                // Triggers keep them in the same transaction as the change, cascades included.
                """
                CREATE TABLE binding_counts (
                    type TEXT NOT NULL,
                    status TEXT NOT NULL,
                    n INTEGER NOT NULL,
                    PRIMARY KEY (type, status)
                ) STRICT, WITHOUT ROWID
                """,
                "INSERT INTO binding_counts (type, status, n) SELECT type, status, COUNT(*) FROM bindings GROUP BY type, status",
                """
                CREATE TRIGGER binding_counts_insert AFTER INSERT ON bindings BEGIN
                    INSERT INTO binding_counts (type, status, n) VALUES (NEW.type, NEW.status, 1)
                        ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
                END
                """,
                """
                CREATE TRIGGER binding_counts_delete AFTER DELETE ON bindings BEGIN
                    UPDATE binding_counts SET n = n - 1 WHERE type = OLD.type AND status = OLD.status;
                END
                """,
                """
                CREATE TRIGGER binding_counts_update AFTER UPDATE OF type, status ON bindings
                WHEN OLD.type IS NOT NEW.type OR OLD.status IS NOT NEW.status BEGIN
                    UPDATE binding_counts SET n = n - 1 WHERE type = OLD.type AND status = OLD.status;
                    INSERT INTO binding_counts (type, status, n) VALUES (NEW.type, NEW.status, 1)
                        ON CONFLICT (type, status) DO UPDATE SET n = n + 1;
                END
                """,
            ]),
        Migration(
            version: 6, name: "call history indexes",
            statements: [
                // GET /v1/calls reads one range of one of these, newest first (SQLite walks an
                // index backwards as cheaply as forwards): the account's calls, an identity's
                // incoming calls, an identity's outgoing (native) calls. The id breaks ties within
                // a millisecond, so keyset pages never skip or repeat a call.
                "CREATE INDEX calls_account_history ON calls(account_id, created_at, id)",
                "CREATE INDEX calls_callee_history ON calls(account_id, callee, created_at, id)",
                "CREATE INDEX calls_caller_history ON calls(account_id, caller, created_at, id) WHERE source = 'native'",
            ]),
        Migration(
            version: 7, name: "account call defaults",
            statements: [
                """
                CREATE TABLE account_call_defaults (
                    account_id TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                    if_busy TEXT NOT NULL
                ) STRICT
                """
            ]),
        Migration(
            version: 8, name: "caller avatar URL",
            statements: [
                // POST /v1/calls takes avatarUrl beside displayName; GET /v1/calls/{id} and every
                // live event about the call show it.
                "ALTER TABLE calls ADD COLUMN caller_avatar_url TEXT"
            ]),
        Migration(
            version: 9, name: "missed-call notices and sealed calls",
            statements: [
                // NULL: the account's default, read only when the call is missed.
                "ALTER TABLE calls ADD COLUMN notify_missed INTEGER",
                "ALTER TABLE calls ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE account_call_defaults ADD COLUMN notify_missed INTEGER NOT NULL DEFAULT 0",
            ]),
        Migration(
            version: 10, name: "ring groups",
            statements: [
                // A ring group's call row keeps its first identity in `callee` and every identity's
                // part as JSON in `participants`; `version` orders its changes (compare-and-set).
                "ALTER TABLE calls ADD COLUMN ring_mode TEXT",
                "ALTER TABLE calls ADD COLUMN participants TEXT",
                "ALTER TABLE calls ADD COLUMN members_ringing INTEGER NOT NULL DEFAULT 0",
                "ALTER TABLE calls ADD COLUMN version INTEGER NOT NULL DEFAULT 0",
                // One row per identity of a ring group: the history of the identities after the
                // first (the first is in calls_callee_history), and who is in a call now (busy).
                """
                CREATE TABLE call_members (
                    call_id TEXT NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
                    account_id TEXT NOT NULL,
                    identity TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    first INTEGER NOT NULL,
                    joined INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (call_id, identity)
                ) WITHOUT ROWID
                """,
                "CREATE INDEX call_members_history ON call_members(account_id, identity, created_at, call_id) WHERE first = 0",
                "CREATE INDEX call_members_joined ON call_members(account_id, identity) WHERE joined = 1",
                // The ring-timeout sweep: answered groups whose other identities still ring.
                "CREATE INDEX calls_group_ringing ON calls(ring_deadline) WHERE state = 'accepted' AND members_ringing = 1",
            ]),
        Migration(version: 11, name: "signed-out devices", statements: [StoreSQL.signedOutDevicesTable]),
        Migration(
            version: 12, name: "account limits",
            statements: [
                // An operator's settings for one account; NULL is the server's.
                """
                CREATE TABLE account_limits (
                    account_id TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                    rate_limit REAL,
                    rate_limit_burst REAL,
                    ring_timeout_seconds INTEGER
                ) STRICT
                """
            ]),
    ]
}
