import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire
import Synchronization

/// `/v1/bindings`: which devices belong to which identity.
///
/// Account keys see the whole account; device access tokens see only their own identity, and
/// another identity's binding answers 404 exactly as a missing one does, so existence never leaks.
///
/// Deleting bindings signs devices out: a device left without an active binding, and every device
/// of an identity whose bindings are deleted together, loses its live connection (4004).
struct BindingsController {
    let store: any DataStore
    /// Told when devices lose their bindings: their live connections close on every instance.
    let cluster: ClusterSync
    let clock: any WallClock
    /// Largest request body accepted.
    let maxBodyBytes: Int
    /// How many bindings an identity (active) and an account (any) may have.
    let limits: BindingLimits
    /// The operator's settings of each account: its budgets.
    let accountLimits: AccountLimitsCache
    /// Binding writes' budgets: each registration (alone or in a batch) takes one token, from the
    /// account's (API key) or, a tenth of it, the identity's (device token).
    let accountLimiter: RateLimiter
    let identityLimiter: RateLimiter

    /// Most items a batch may carry (upserts and deletes together).
    static let maxBatchItems = 500
    /// Largest batch body. Ordinary items (an APNs token, short names) are ~300 bytes, so 500 fit
    /// many times over; a batch of the largest items (4,096-byte FCM tokens) must be split. Held in
    /// memory while it is parsed, so it stays small: 60 connections each holding a 4 MiB body once
    /// took 225 MB.
    static let maxBatchBodyBytes = 1024 * 1024

    func register(on router: Router<RingRelayRequestContext>) {
        router.post("/v1/bindings") { request, context in try await create(request, context) }
        router.get("/v1/bindings") { request, context in try await list(request, context) }
        router.delete("/v1/bindings") { request, context in try await deleteIdentity(request, context) }
        router.post("/v1/bindings/batch") { request, context in try await batch(request, context) }
        router.get("/v1/bindings/:bindingId") { _, context in try await get(context) }
        router.delete("/v1/bindings/:bindingId") { _, context in try await delete(context) }
    }

    func create(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<BindingResource> {
        let scope = try context.requireScope()
        let body = try await request.decodeJSON(BindingRequest.self, maxBytes: maxBodyBytes)
        let upsert = try await register(body, scope: scope)
        context.logger.info(
            upsert.created ? "binding created" : "binding updated",
            metadata: ["binding.id": .string(upsert.binding.id), "binding.type": .string(upsert.binding.type.rawValue)])
        return JSONResponse(upsert.created ? .created : .ok, BindingResource(upsert.binding))
    }

    /// Validates one registration against the caller's scope and stores it.
    private func register(_ body: BindingRequest, scope: AccountScope) async throws -> BindingUpsert {
        let identity: String
        switch (body.identity, scope.identity) {
        case (let requested?, let own?) where requested != own:
            throw RingRelayError.forbidden("A device access token can only register bindings for its own identity.")
        case (let requested?, _): identity = requested
        case (nil, let own?): identity = own
        case (nil, nil): throw RingRelayError.missingField("identity")
        }
        guard let type = BindingType(rawValue: body.type) else {
            throw RingRelayError.invalidField("type", "must be one of \(BindingType.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        var environment: PushEnvironment?
        if let name = body.environment {
            guard let parsed = PushEnvironment(rawValue: name) else {
                throw RingRelayError.invalidField("environment", "must be 'production' or 'sandbox'.")
            }
            environment = parsed
        }
        if let own = scope.deviceID, let requested = body.deviceId, requested != own {
            throw RingRelayError.forbidden("A device access token can only register bindings for its own deviceId ('\(ClientText.echo(own))').")
        }
        let registration = try BindingRegistration(
            accountID: scope.accountID, identity: identity, type: type, token: body.token, environment: environment,
            deviceID: body.deviceId ?? scope.deviceID, publicKey: body.publicKey)
        // A device's writes spend its identity's budget, as its calls do.
        let own = try await accountLimits.limits(scope.accountID)
        if let device = scope.identity {
            try identityLimiter.take(
                "\(scope.accountID)|\(device)", tooMany: "binding writes for this identity", rate: own.identityRate, burst: own.identityBurst)
        } else {
            try accountLimiter.take(
                scope.accountID, tooMany: "binding writes for this account", rate: own.rateLimit,
                burst: own.rateLimitBurst.map { max($0, Double(Self.maxBatchItems)) })
        }
        let now = clock.now
        let accountHasRoom = try await limits.accountHasRoom(scope.accountID, store: store)
        guard
            let upsert = try await store.upsertBinding(
                registration, newID: ResourceID.make(ResourceID.binding, at: now), now: now,
                room: BindingRoom(perIdentity: limits.perIdentity, accountHasRoom: accountHasRoom))
        else {
            throw accountHasRoom
                ? RingRelayError(
                    .conflict, code: .tooManyBindings,
                    "The identity has \(limits.perIdentity) active bindings, the most it may have; delete one it no longer uses first.")
                : RingRelayError(
                    .conflict, code: .tooManyBindings,
                    "The account has \(limits.perAccount) bindings, the most it may have; delete bindings it no longer uses first.")
        }
        if upsert.created { limits.created(in: scope.accountID) }
        return upsert
    }

    func list(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<BindingList> {
        let scope = try context.requireScope()
        let parameters = request.uri.queryParameters
        var query = BindingQuery()
        query.identity = try QueryParameter.scopedIdentity(parameters, scope: scope, listing: "bindings")
        if let text = parameters["type"].map(String.init) {
            guard let type = BindingType(rawValue: text) else {
                throw QueryParameter.invalid("type", "must be one of \(BindingType.allCases.map(\.rawValue).joined(separator: ", ")).")
            }
            query.type = type
        }
        if let text = parameters["status"].map(String.init) {
            guard let status = BindingStatus(rawValue: text) else {
                throw QueryParameter.invalid("status", "must be 'active' or 'invalid'.")
            }
            query.status = status
        }
        if let text = parameters["limit"].map(String.init) {
            query.limit = try QueryParameter.limit(text, max: BindingQuery.maxLimit)
        }
        if let cursor = parameters["cursor"].map(String.init) {
            query.after = try Cursor.decode(cursor, prefix: ResourceID.binding)
        }
        let page = try await store.listBindings(accountID: scope.accountID, query: query)
        return JSONResponse(BindingList(data: page.items.map(BindingResource.init), nextCursor: page.nextAfter.map(Cursor.encode)))
    }

    func get(_ context: RingRelayRequestContext) async throws -> JSONResponse<BindingResource> {
        let scope = try context.requireScope()
        let id = context.parameters.value("bindingId")
        guard let binding = try await store.binding(id: id, accountID: scope.accountID, identity: scope.identity) else {
            throw RingRelayError.notFound("binding", id: id)
        }
        return JSONResponse(BindingResource(binding))
    }

    func delete(_ context: RingRelayRequestContext) async throws -> Response {
        let scope = try context.requireScope()
        let id = context.parameters.value("bindingId")
        guard try await remove(id: id, accountID: scope.accountID, identity: scope.identity) else {
            throw RingRelayError.notFound("binding", id: id)
        }
        context.logger.info("binding deleted", metadata: ["binding.id": .string(id)])
        return Response(status: .noContent)
    }

    func deleteIdentity(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<DeletedBindings> {
        let accountID = try context.requireAccountKey()
        guard let parameter = request.uri.queryParameters["identity"].map(String.init) else {
            throw RingRelayError(.unprocessable, code: .missingParameter, "Pass ?identity= to delete every binding of that identity.")
        }
        let identity = try QueryParameter.identity(parameter)
        let deleted = try await store.deleteBindings(accountID: accountID, identity: identity)
        try await store.signOutDevices(accountID: accountID, identity: identity, deviceIDs: nil, at: clock.now)
        await cluster.announce(.devicesUnbound(accountID: accountID, identity: identity, deviceIDs: nil))
        context.logger.info("identity bindings deleted", metadata: ["bindings.deleted": .stringConvertible(deleted)])
        return JSONResponse(DeletedBindings(deleted: deleted))
    }

    /// Deletes a binding; when its device has no active binding left, signs the device out (its
    /// access tokens minted until now stop working) and closes its live connection. Returns
    /// `false` when there was no such binding.
    private func remove(id: String, accountID: String, identity: String?) async throws -> Bool {
        let binding = try await store.binding(id: id, accountID: accountID, identity: identity)
        guard try await store.deleteBinding(id: id, accountID: accountID, identity: identity) else { return false }
        if let binding, let deviceID = binding.deviceID,
            try await !store.activeBindings(accountID: accountID, identity: binding.identity).contains(where: { $0.deviceID == deviceID })
        {
            try await store.signOutDevices(accountID: accountID, identity: binding.identity, deviceIDs: [deviceID], at: clock.now)
            await cluster.announce(.devicesUnbound(accountID: accountID, identity: binding.identity, deviceIDs: [deviceID]))
        }
        return true
    }

    func batch(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<BindingBatchResponse> {
        let accountID = try context.requireAccountKey()
        // A batch when the budget is spent is refused before its body is read: reading and
        // parsing 500 items only to refuse each one cost the other tenants as much as taking them.
        let own = try await accountLimits.limits(accountID)
        try accountLimiter.requireToken(
            accountID, tooMany: "binding writes for this account", rate: own.rateLimit, burst: own.rateLimitBurst.map { max($0, Double(Self.maxBatchItems)) })
        let body = try await request.decodeJSON(BindingBatchRequest.self, maxBytes: max(maxBodyBytes, Self.maxBatchBodyBytes))
        let upserts = body.upsert ?? []
        let deletes = body.delete ?? []
        guard upserts.count + deletes.count <= Self.maxBatchItems else {
            throw RingRelayError(
                .unprocessable, code: .batchTooLarge,
                "A batch holds at most \(Self.maxBatchItems) items; this one has \(upserts.count + deletes.count). Split it.")
        }
        let scope = AccountScope(accountID: accountID)
        var upsertResults: [BindingBatchResponse.UpsertResult] = []
        upsertResults.reserveCapacity(upserts.count)
        for (index, item) in upserts.enumerated() {
            do {
                let body = try Request.decode(BindingRequest.self, from: JSONEncoder.ringRelay.encode(item))
                let upsert = try await register(body, scope: scope)
                upsertResults.append(.init(index: index, status: upsert.created ? 201 : 200, binding: BindingResource(upsert.binding)))
            } catch {
                let mapped = ErrorMiddleware.map(error)
                // A store failure is not the item's fault: fail the request, don't report it per item.
                if mapped.kind == .internal || mapped.kind == .unavailable { throw error }
                upsertResults.append(
                    .init(index: index, status: Int(ErrorMiddleware.status(of: mapped.kind).code), error: .init(code: mapped.code, message: mapped.message)))
            }
        }
        var deleteResults: [BindingBatchResponse.DeleteResult] = []
        deleteResults.reserveCapacity(deletes.count)
        for id in deletes {
            if try await remove(id: id, accountID: accountID, identity: nil) {
                deleteResults.append(.init(id: id, status: 204))
            } else {
                let error = RingRelayError.notFound("binding", id: id)
                deleteResults.append(.init(id: id, status: 404, error: .init(code: error.code, message: error.message)))
            }
        }
        context.logger.info(
            "binding batch", metadata: ["batch.upserts": .stringConvertible(upserts.count), "batch.deletes": .stringConvertible(deletes.count)])
        return JSONResponse(BindingBatchResponse(upsert: upsertResults, delete: deleteResults))
    }
}

/// How many bindings an identity and an account may have (`--max-bindings-per-identity`,
/// `--max-bindings-per-account`).
///
/// An identity's active bindings are counted by the store as it registers (exact); an account's
/// count is read at most every ``recount`` and kept up by this instance's registrations in
/// between: a count of every binding at each registration would cost as much as the account is
/// large, and the account limit is a guard against runaway growth, not an exact quota (other
/// instances' registrations of the last seconds may pass it by that many).
final class BindingLimits: Sendable {
    let perIdentity: Int
    let perAccount: Int
    private let counts = Mutex<[String: (count: Int, readAt: ContinuousClock.Instant)]>([:])
    /// How long an account's count is kept before it is read again.
    static let recount: Duration = .seconds(5)

    init(perIdentity: Int, perAccount: Int) {
        self.perIdentity = perIdentity
        self.perAccount = perAccount
    }

    /// Whether the account may have one more binding.
    func accountHasRoom(_ accountID: String, store: any DataStore) async throws -> Bool {
        let now = ContinuousClock.now
        if let known = counts.withLock({ $0[accountID] }), now - known.readAt < Self.recount { return known.count < perAccount }
        let count = try await store.bindingCount(accountID: accountID)
        counts.withLock { counts in
            if counts.count > 10_000 { counts.removeAll() }
            counts[accountID] = (count, now)
        }
        return count < perAccount
    }

    /// A registration made a binding.
    func created(in accountID: String) {
        counts.withLock { counts in counts[accountID]?.count += 1 }
    }
}
