import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire

/// `/v1/accounts`: the operator's view of tenants and their API keys. Admin token only.
struct AccountsController {
    let store: any DataStore
    let clock: any WallClock
    /// Told when an account goes: its live connections close (4003), on every instance, and its
    /// cached credentials and faults go.
    let cluster: ClusterSync
    /// Largest request body accepted.
    let maxBodyBytes: Int

    func register(on router: Router<RingRelayRequestContext>) {
        router.post("/v1/accounts") { request, context in try await create(request, context) }
        router.get("/v1/accounts") { _, context in try await list(context) }
        router.delete("/v1/accounts/:accountId") { _, context in try await delete(context) }
        router.post("/v1/accounts/:accountId/keys") { request, context in try await createKey(request, context) }
        router.delete("/v1/accounts/:accountId/keys/:keyId") { _, context in try await revokeKey(context) }
        router.get("/v1/accounts/:accountId/limits") { _, context in try await limits(context) }
        router.put("/v1/accounts/:accountId/limits") { request, context in try await setLimits(request, context) }
    }

    func create(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<CreatedAccount> {
        try context.requireAdmin()
        let body = try await request.decodeJSON(CreateAccountRequest.self, maxBytes: maxBodyBytes)
        let (created, _) = try await Self.createAccount(named: body.name, store: store, now: clock.now)
        context.logger.info("account created", metadata: ["account.id": .string(created.id)])
        return JSONResponse(.created, created)
    }

    /// Creates an account and its first key; shared with the first-start bootstrap.
    static func createAccount(named name: String, store: any DataStore, now: Date) async throws -> (CreatedAccount, APIKeyRecord) {
        try Account.validateName(name)
        let account = Account(id: ResourceID.make(ResourceID.account, at: now), name: name, createdAt: now)
        let (secret, key) = newKey(accountID: account.id, now: now)
        try await store.createAccount(account, firstKey: key)
        return (CreatedAccount(id: account.id, name: account.name, apiKey: secret, keyId: key.id, createdAt: now), key)
    }

    func list(_ context: RingRelayRequestContext) async throws -> JSONResponse<AccountList> {
        try context.requireAdmin()
        return JSONResponse(AccountList(data: try await store.listAccounts().map(AccountResource.init)))
    }

    func delete(_ context: RingRelayRequestContext) async throws -> Response {
        try context.requireAdmin()
        let id = context.parameters.value("accountId")
        guard try await store.deleteAccount(id: id) else { throw RingRelayError.notFound("account", id: id) }
        await cluster.announce(.accountDeleted(accountID: id))
        context.logger.info("account deleted", metadata: ["account.id": .string(id)])
        return Response(status: .noContent)
    }

    /// The operator's settings for one account; fields left out are the server's.
    func limits(_ context: RingRelayRequestContext) async throws -> JSONResponse<AccountLimitsBody> {
        try context.requireAdmin()
        let id = try await existingAccount(context)
        return JSONResponse(Self.body(try await store.accountLimits(accountID: id)))
    }

    /// Replaces the operator's settings for one account (a field left out goes back to the
    /// server's); every instance uses them within a moment (`limitsChanged`).
    func setLimits(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<AccountLimitsBody> {
        try context.requireAdmin()
        let id = try await existingAccount(context)
        let body = try await request.decodeJSON(AccountLimitsBody.self, maxBytes: maxBodyBytes)
        let limits = try AccountLimits(rateLimit: body.rateLimit, rateLimitBurst: body.rateLimitBurst, ringTimeoutSeconds: body.ringTimeoutSeconds)
            .validated()
        try await store.setAccountLimits(limits, accountID: id)
        await cluster.announce(.limitsChanged(accountID: id))
        context.logger.info("account limits set", metadata: ["account.id": .string(id)])
        return JSONResponse(Self.body(limits))
    }

    private func existingAccount(_ context: RingRelayRequestContext) async throws -> String {
        let id = context.parameters.value("accountId")
        guard try await store.account(id: id) != nil else { throw RingRelayError.notFound("account", id: id) }
        return id
    }

    private static func body(_ limits: AccountLimits) -> AccountLimitsBody {
        AccountLimitsBody(rateLimit: limits.rateLimit, rateLimitBurst: limits.rateLimitBurst, ringTimeoutSeconds: limits.ringTimeoutSeconds)
    }

    func createKey(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<CreatedKey> {
        try context.requireAdmin()
        try await request.expectNoBody(maxBytes: maxBodyBytes)
        let id = context.parameters.value("accountId")
        guard try await store.account(id: id) != nil else { throw RingRelayError.notFound("account", id: id) }
        let now = clock.now
        let (secret, key) = Self.newKey(accountID: id, now: now)
        try await store.addKey(key)
        context.logger.info("api key created", metadata: ["account.id": .string(id), "key.id": .string(key.id)])
        return JSONResponse(.created, CreatedKey(id: key.id, accountId: id, apiKey: secret, createdAt: now))
    }

    func revokeKey(_ context: RingRelayRequestContext) async throws -> Response {
        try context.requireAdmin()
        let accountID = context.parameters.value("accountId")
        let keyID = context.parameters.value("keyId")
        guard try await store.revokeKey(accountID: accountID, keyID: keyID, at: clock.now) else {
            throw RingRelayError.notFound("key", id: keyID)
        }
        context.logger.info("api key revoked", metadata: ["account.id": .string(accountID), "key.id": .string(keyID)])
        return Response(status: .noContent)
    }

    private static func newKey(accountID: String, now: Date) -> (secret: String, record: APIKeyRecord) {
        let secret = Secrets.generate(prefix: AuthMiddleware.apiKeyPrefix)
        let record = APIKeyRecord(
            id: ResourceID.make(ResourceID.apiKey, at: now), accountID: accountID, secretHash: Secrets.hash(secret),
            hint: String(secret.suffix(4)), createdAt: now)
        return (secret, record)
    }
}
