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
        let (limiter, key, who) =
            scope.identity.map { (identityLimiter, "\(scope.accountID)|\($0)", "this identity") } ?? (accountLimiter, scope.accountID, "this account")
        try limiter.take(key, tooMany: "calls for \(who)")
        let result = try await calls.start(body, scope: scope)
        return JSONResponse(.created, CallResource(result.call, deliveries: result.deliveries))
    }

    func get(_ context: RingRelayRequestContext) async throws -> JSONResponse<CallResource> {
        let scope = try context.requireScope()
        let id = context.parameters.value("callId")
        // Only participants may read a call; anyone else gets the same 404 as for a missing one.
        guard let call = try await store.call(id: id, accountID: scope.accountID),
            scope.identity.map(call.isParticipant) ?? true
        else {
            throw RingRelayError.notFound("call", id: id)
        }
        return JSONResponse(CallResource(call, deliveries: try await store.deliveries(callID: call.id)))
    }

    func apply(_ command: CallCommand, _ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<CallResource> {
        let scope = try context.requireScope()
        // The body is optional: an account key may name the device it acts for.
        var body = CallCommandRequest()
        let bytes: ByteBuffer
        do {
            bytes = try await request.body.collect(upTo: Self.maxCommandBodyBytes)
        } catch is NIOTooManyBytesError {
            throw Request.tooLarge(Self.maxCommandBodyBytes)
        }
        if bytes.readableBytes > 0 {
            guard request.headers[.contentType].map(Request.isJSON) == true else { throw Request.notJSON }
            body = try Request.decode(CallCommandRequest.self, from: Data(bytes.readableBytesView))
        }
        let actor: CallActor
        if let identity = scope.identity {
            if let named = body.deviceId, named != scope.deviceID {
                throw RingRelayError.forbidden("A device access token acts only as its own device '\(scope.deviceID ?? "")'.")
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
