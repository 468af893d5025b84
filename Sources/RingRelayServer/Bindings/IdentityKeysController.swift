import Foundation
import Hummingbird
import RingRelayCore
import RingRelayWire

/// `GET /v1/identities/{identity}/keys`: the key directory a caller seals invites with — the
/// identity's active bindings that carry a public key.
///
/// An account key sees every identity of its account; a device token sees every identity of its
/// own account (a caller needs the callee's keys). Identities exist only through their bindings
/// in an account, so one with no active binding here is not found (404 `identity_not_found`),
/// which is all another account's identity can be: both answers are the same, so nothing leaks
/// across accounts (decision 0005). An identity with bindings but no key answers an empty list.
struct IdentityKeysController {
    let store: any DataStore

    func register(on router: Router<RingRelayRequestContext>) {
        router.get("/v1/identities/:identity/keys") { _, context in
            let scope = try context.requireScope()
            // The path segment as sent: percent-encoded where the identity needs it.
            guard let decoded = context.parameters.value("identity").removingPercentEncoding else {
                throw QueryParameter.invalid("identity", "is not valid percent-encoded UTF-8.")
            }
            let identity = try QueryParameter.identity(decoded)
            let bindings = try await store.activeBindings(accountID: scope.accountID, identity: identity)
            guard !bindings.isEmpty else {
                throw RingRelayError(
                    .notFound, code: .identityNotFound, "The identity '\(ClientText.echo(identity))' has no active binding in this account.")
            }
            let keys = bindings.sorted { ($0.registeredAt, $0.id) < ($1.registeredAt, $1.id) }.compactMap { binding in
                binding.publicKey.map { key in
                    DeviceKeyResource(
                        bindingId: binding.id, deviceId: binding.deviceID, type: binding.type.rawValue, publicKey: key,
                        registeredAt: binding.registeredAt)
                }
            }
            return JSONResponse(DeviceKeyList(identity: identity, data: keys))
        }
    }
}
