import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire

/// `/v1/calls`: call records with every delivery.
struct CallsController {
    let services: AppServices

    func register(on router: Router<RingRelayRequestContext>) {
        router.get("/v1/calls/:callId") { _, context in try await get(context) }
    }

    func get(_ context: RingRelayRequestContext) async throws -> JSONResponse<CallResource> {
        let scope = try context.requireScope()
        let id = context.parameters.value("callId")
        // Only participants may read a call; anyone else gets the same 404 as for a missing one.
        guard let call = try await services.store.call(id: id, accountID: scope.accountID),
            scope.identity == nil || scope.identity == call.callee || scope.identity == call.caller
        else {
            throw RingRelayError.notFound("call", id: id)
        }
        return JSONResponse(CallResource(call, deliveries: try await services.store.deliveries(callID: call.id)))
    }
}
