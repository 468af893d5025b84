import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire

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

    /// Most items a batch may carry (upserts and deletes together).
    static let maxBatchItems = 500
    /// Largest batch body: its items at their largest (a 4,096-byte FCM token, identity and device
    /// id of 256 characters written as JSON escapes, the field names) fit in 8 KiB each. The
    /// general limit would refuse a valid batch of 500 ordinary items.
    static let maxBatchBodyBytes = maxBatchItems * 8 * 1024

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
            throw RingRelayError.forbidden("A device access token can only register bindings for its own deviceId ('\(own)').")
        }
        let registration = try BindingRegistration(
            accountID: scope.accountID, identity: identity, type: type, token: body.token, environment: environment,
            deviceID: body.deviceId ?? scope.deviceID, publicKey: body.publicKey)
        let now = clock.now
        return try await store.upsertBinding(registration, newID: ResourceID.make(ResourceID.binding, at: now), now: now)
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
