import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire

/// `/v1/settings/calls`: an account's defaults for the calls it places (what a call to a busy
/// callee does, whether an unanswered one sends missed-call notices). Account API key only; each call may override them.
struct CallSettingsController {
    let store: any DataStore
    /// Largest request body accepted.
    let maxBodyBytes: Int

    func register(on router: Router<RingRelayRequestContext>) {
        router.get("/v1/settings/calls") { _, context in
            let accountID = try context.requireAccountKey()
            return JSONResponse(Self.body(try await store.callDefaults(accountID: accountID)))
        }
        router.patch("/v1/settings/calls") { request, context in
            let accountID = try context.requireAccountKey()
            let body = try await request.decodeJSON(CallSettings.self, maxBytes: maxBodyBytes)
            var defaults = try await store.callDefaults(accountID: accountID)
            if let ifBusy = body.ifBusy { defaults.ifBusy = try CallService.busyPolicy(ifBusy) }
            if let notifyMissed = body.notifyMissed { defaults.notifyMissed = notifyMissed }
            try await store.setCallDefaults(defaults, accountID: accountID)
            context.logger.info(
                "call defaults changed",
                metadata: ["calls.ifBusy": .string(defaults.ifBusy.rawValue), "calls.notifyMissed": .stringConvertible(defaults.notifyMissed)])
            return JSONResponse(Self.body(defaults))
        }
    }

    static func body(_ defaults: CallDefaults) -> CallSettings {
        CallSettings(ifBusy: defaults.ifBusy.rawValue, notifyMissed: defaults.notifyMissed)
    }
}
