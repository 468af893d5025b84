import Foundation
import Hummingbird
import Logging
import NIOCore
import RingRelayCore
import RingRelayWire

/// `/v1/calls`: native calls, their commands, every call's record with its deliveries, and the
/// call history (see `CallsController+History.swift`).
struct CallsController {
    let store: any DataStore
    let calls: CallService
    /// Calls placed with the account's API key, per account (apart from the webhooks' budget).
    /// The operator's settings of each account: its budgets.
    let limits: AccountLimitsCache
    let accountLimiter: RateLimiter
    /// Calls placed by a device, per calling identity.
    let identityLimiter: RateLimiter
    /// Largest request body accepted, `sealed` aside.
    let maxBodyBytes: Int

    /// Largest body of a call command: it holds at most a `deviceId`.
    static let maxCommandBodyBytes = 4096
    /// Room for one sealed invite: its box of up to 3,072 characters, its binding id and the JSON
    /// around them take 3,128 bytes as the SDK writes them; the rest is for encoders that escape
    /// `/` or add spaces.
    static let maxSealedInviteBytes = 4096

    /// Largest body of `POST /v1/calls`: `general` for everything but `sealed` (its largest
    /// fields, twenty callees' identities, are a fraction of it), and room for the most sealed
    /// invites at their largest.
    static func maxStartBodyBytes(general: Int) -> Int {
        general + CallService.maxSealedInvites * maxSealedInviteBytes
    }

    func register(on router: Router<RingRelayRequestContext>) {
        router.post("/v1/calls") { request, context in try await start(request, context) }
        router.get("/v1/calls") { request, context in try await history(request, context) }
        router.get("/v1/calls/:callId") { _, context in try await get(context) }
        router.get("/v1/calls/:callId/deliveries") { request, context in try await deliveries(request, context) }
        for command in CallCommand.allCases {
            router.post("/v1/calls/:callId/\(command.rawValue)") { request, context in
                try await apply(command, request, context)
            }
        }
    }

    func start(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<CallResource> {
        let scope = try context.requireScope()
        let bytes = try await request.jsonBody(maxBytes: Self.maxStartBodyBytes(general: maxBodyBytes))
        let body = try CreateCallRequest(fastParsing: bytes.readableBytesView) ?? Request.decode(CreateCallRequest.self, from: Data(bytes.readableBytesView))
        // A device's calls spend its identity's budget only: calling no one, or calling in a loop,
        // costs the caller, never the account's backend or its provider webhooks.
        let own = try await limits.limits(scope.accountID)
        if let identity = scope.identity {
            try identityLimiter.take(
                "\(scope.accountID)|\(identity)", tooMany: "calls for this identity", rate: own.identityRate, burst: own.identityBurst)
        } else {
            try accountLimiter.take(scope.accountID, tooMany: "calls for this account", rate: own.rateLimit, burst: own.rateLimitBurst)
        }
        let result = try await calls.start(body, scope: scope)
        // As `GET` answers: the first page of deliveries, and where the rest are.
        let page = Self.firstPage(of: result.deliveries)
        var resource = CallResource(result.call, deliveries: page.deliveries)
        resource.deliveriesNextCursor = page.nextCursor
        return JSONResponse(.created, resource)
    }

    /// Most deliveries one answer carries (in `GET /v1/calls/{id}` and a page of its deliveries):
    /// a ring of tens of thousands of devices is read in pages, not in one answer of megabytes.
    static let deliveriesPerPage = 500

    func get(_ context: RingRelayRequestContext) async throws -> JSONResponse<CallResource> {
        let call = try await readableCall(context)
        let page = try await deliveryPage(of: call, after: nil, limit: Self.deliveriesPerPage)
        var resource = CallResource(call, deliveries: page.data)
        resource.deliveriesNextCursor = page.nextCursor
        return JSONResponse(resource)
    }

    func deliveries(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<DeliveryList> {
        let call = try await readableCall(context)
        let parameters = request.uri.queryParameters
        let limit = try parameters["limit"].map { try QueryParameter.limit(String($0), max: Self.deliveriesPerPage) } ?? Self.deliveriesPerPage
        let after = try parameters["cursor"].map { try Cursor.decode(String($0), prefix: ResourceID.delivery) }
        let page = try await deliveryPage(of: call, after: after, limit: limit)
        return JSONResponse(DeliveryList(data: page.data.map(DeliveryResource.init), nextCursor: page.nextCursor))
    }

    /// The call named in the path, if the caller may read it: only participants may, and anyone
    /// else gets the same 404 as for a missing one.
    private func readableCall(_ context: RingRelayRequestContext) async throws -> Call {
        let scope = try context.requireScope()
        let id = context.parameters.value("callId")
        guard let call = try await store.call(id: id, accountID: scope.accountID), scope.identity.map(call.isParticipant) ?? true else {
            throw RingRelayError.notFound("call", id: id)
        }
        return call
    }

    /// The first page of a ring's deliveries as the store pages them (by id), and the cursor of
    /// the next: for the answers that carry a ring's deliveries as they were planned.
    static func firstPage(of deliveries: [Delivery]) -> (deliveries: [Delivery], nextCursor: String?) {
        guard deliveries.count > deliveriesPerPage else { return (deliveries, nil) }
        let page = Array(deliveries.sorted { $0.id < $1.id }.prefix(deliveriesPerPage))
        return (page, page.last.map { Cursor.encode($0.id) })
    }

    /// Up to `limit` of the call's deliveries after `after`, and the cursor of the next page: one
    /// more is read to know whether there is one.
    private func deliveryPage(of call: Call, after: String?, limit: Int) async throws -> (data: [Delivery], nextCursor: String?) {
        var deliveries = try await store.deliveries(callID: call.id, after: after, limit: limit + 1)
        guard deliveries.count > limit else { return (deliveries, nil) }
        deliveries.removeLast()
        return (deliveries, deliveries.last.map { Cursor.encode($0.id) })
    }

    func apply(_ command: CallCommand, _ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<CallResource> {
        let scope = try context.requireScope()
        // The body is optional: an account key may name the device it acts for.
        var body = CallCommandRequest()
        let bytes = try await request.collectBody(maxBytes: Self.maxCommandBodyBytes)
        if bytes.readableBytes > 0 {
            guard request.headers[.contentType].map(Request.isJSON) == true else { throw Request.notJSON }
            body = try Request.decode(CallCommandRequest.self, from: Data(bytes.readableBytesView))
        }
        let actor: CallActor
        if let identity = scope.identity {
            if let named = body.deviceId, named != scope.deviceID {
                throw RingRelayError.forbidden("A device access token acts only as its own device '\(ClientText.echo(scope.deviceID ?? ""))'.")
            }
            actor = CallActor(identity: identity, deviceID: scope.deviceID)
        } else {
            if let deviceID = body.deviceId { try BindingRules.validateDeviceID(deviceID) }
            actor = CallActor(identity: nil, deviceID: body.deviceId)
        }
        let call = try await calls.apply(command, callID: context.parameters.value("callId"), accountID: scope.accountID, actor: actor)
        return JSONResponse(CallResource(call, deliveries: nil))
    }
}
