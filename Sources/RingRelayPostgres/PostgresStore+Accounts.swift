import Foundation
import PostgresNIO
import RingRelayCore
import RingRelayWire

// MARK: - Accounts

extension PostgresStore {
    public func createAccount(_ account: Account, firstKey: APIKeyRecord) async throws {
        do {
            try await withConnection { connection in
                try await connection.withTransaction(logger: self.logger) { connection in
                    _ = try await connection.query(
                        "INSERT INTO accounts (id, name, created_at) VALUES (\(account.id), \(account.name), \(account.createdAt.millis))",
                        logger: self.logger)
                    _ = try await connection.query(Self.insertKey(firstKey), logger: self.logger)
                }
            }
        } catch  where Self.sqlState(of: error) == PostgresFailure.uniqueViolation {
            throw RingRelayError(
                .conflict, code: .accountNameTaken, "An account named '\(ClientText.echo(account.name))' already exists; pick another name.")
        }
    }

    public func listAccounts() async throws -> [Account] {
        try await rows("SELECT id, name, created_at FROM accounts ORDER BY created_at, id").map(Self.account)
    }

    public func account(id: String) async throws -> Account? {
        try await rows("SELECT id, name, created_at FROM accounts WHERE id = \(id)").first.map(Self.account)
    }

    public func deleteAccount(id: String) async throws -> Bool {
        // Its keys, credentials, bindings, calls and deliveries go with it (ON DELETE CASCADE).
        try await !rows("DELETE FROM accounts WHERE id = \(id) RETURNING id").isEmpty
    }

    public func addKey(_ key: APIKeyRecord) async throws {
        _ = try await rows(Self.insertKey(key))
    }

    public func revokeKey(accountID: String, keyID: String, at date: Date) async throws -> Bool {
        try await !rows(
            "UPDATE api_keys SET revoked_at = \(date.millis) WHERE id = \(keyID) AND account_id = \(accountID) AND revoked_at IS NULL RETURNING id"
        ).isEmpty
    }

    enum ActiveKey: PreparedText {
        static func query(secretHash: String) -> PostgresQuery {
            "SELECT id, account_id, secret_hash, hint, created_at, revoked_at FROM api_keys WHERE secret_hash = \(secretHash) AND revoked_at IS NULL"
        }
        static let sql = query(secretHash: "").sql
    }

    public func activeKey(secretHash: String) async throws -> APIKeyRecord? {
        try await rows(Prepared<ActiveKey>(ActiveKey.query(secretHash: secretHash))).first.map { row in
            APIKeyRecord(
                id: try row.string("id"), accountID: try row.string("account_id"), secretHash: try row.string("secret_hash"),
                hint: try row.string("hint"), createdAt: try row.date("created_at"), revokedAt: try row.optionalDate("revoked_at"))
        }
    }

    public func accountLimits(accountID: String) async throws -> AccountLimits {
        guard
            let row = try await rows(
                "SELECT rate_limit, rate_limit_burst, ring_timeout_seconds FROM account_limits WHERE account_id = \(accountID)"
            ).first
        else { return .serverDefaults }
        return AccountLimits(
            rateLimit: try row["rate_limit"].decode(Double?.self), rateLimitBurst: try row["rate_limit_burst"].decode(Double?.self),
            ringTimeoutSeconds: try row["ring_timeout_seconds"].decode(Int?.self))
    }

    public func setAccountLimits(_ limits: AccountLimits, accountID: String) async throws {
        _ = try await rows(
            """
            INSERT INTO account_limits (account_id, rate_limit, rate_limit_burst, ring_timeout_seconds)
            VALUES (\(accountID), \(limits.rateLimit), \(limits.rateLimitBurst), \(limits.ringTimeoutSeconds.map(Int32.init)))
            ON CONFLICT (account_id) DO UPDATE SET rate_limit = excluded.rate_limit, rate_limit_burst = excluded.rate_limit_burst,
                ring_timeout_seconds = excluded.ring_timeout_seconds
            """)
    }

    enum CallDefaultsOf: PreparedText {
        static func query(accountID: String) -> PostgresQuery {
            "SELECT if_busy, notify_missed FROM account_call_defaults WHERE account_id = \(accountID)"
        }
        static let sql = query(accountID: "").sql
    }

    public func callDefaults(accountID: String) async throws -> CallDefaults {
        guard let row = try await rows(Prepared<CallDefaultsOf>(CallDefaultsOf.query(accountID: accountID))).first
        else { return CallDefaults() }
        return CallDefaults(ifBusy: BusyPolicy(rawValue: try row.string("if_busy")) ?? .ring, notifyMissed: try row.boolean("notify_missed"))
    }

    public func setCallDefaults(_ defaults: CallDefaults, accountID: String) async throws {
        _ = try await rows(
            """
            INSERT INTO account_call_defaults (account_id, if_busy, notify_missed) VALUES (\(accountID), \(defaults.ifBusy.rawValue), \(defaults.notifyMissed))
            ON CONFLICT (account_id) DO UPDATE SET if_busy = excluded.if_busy, notify_missed = excluded.notify_missed
            """)
    }

    private static func insertKey(_ key: APIKeyRecord) -> PostgresQuery {
        """
        INSERT INTO api_keys (id, account_id, secret_hash, hint, created_at, revoked_at)
        VALUES (\(key.id), \(key.accountID), \(key.secretHash), \(key.hint), \(key.createdAt.millis), NULL)
        """
    }

    private static func account(_ row: PostgresRandomAccessRow) throws -> Account {
        Account(id: try row.string("id"), name: try row.string("name"), createdAt: try row.date("created_at"))
    }
}

// MARK: - Credentials

extension PostgresStore {
    public func putCredential(_ credential: Credential, accountID: String, at date: Date) async throws {
        let payload = String(decoding: try JSONEncoder().encode(credential), as: UTF8.self)
        _ = try await rows(
            """
            INSERT INTO credentials (account_id, kind, payload, updated_at) VALUES (\(accountID), \(credential.kind.rawValue), \(payload), \(date.millis))
            ON CONFLICT (account_id, kind) DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at
            """)
    }

    public func credentials(accountID: String) async throws -> [StoredCredential] {
        try await rows("SELECT payload, updated_at FROM credentials WHERE account_id = \(accountID) ORDER BY kind").map(Self.credential)
    }

    public func credential(kind: CredentialKind, accountID: String) async throws -> StoredCredential? {
        try await rows("SELECT payload, updated_at FROM credentials WHERE account_id = \(accountID) AND kind = \(kind.rawValue)")
            .first.map(Self.credential)
    }

    public func deleteCredential(kind: CredentialKind, accountID: String) async throws -> Bool {
        try await !rows("DELETE FROM credentials WHERE account_id = \(accountID) AND kind = \(kind.rawValue) RETURNING kind").isEmpty
    }

    private static func credential(_ row: PostgresRandomAccessRow) throws -> StoredCredential {
        let credential = try JSONDecoder().decode(Credential.self, from: Data(try row.string("payload").utf8))
        return StoredCredential(credential: credential, updatedAt: try row.date("updated_at"))
    }
}
