import Foundation
import RingRelayAPNs
import RingRelayCore

/// APNs as a ``PushProvider``: a VoIP or alert push (by binding type) through ``APNsClient``.
struct APNsPushProvider: PushProvider {
    /// The APNs client; a long-lived service.
    let client: APNsClient

    var channel: PushChannel { .apns }
    var credentialKind: CredentialKind { .apns }
    var notConfigured: RingRelayError {
        RingRelayError(.conflict, code: .apnsNotConfigured, "The account has no APNs credentials; upload them with PUT /v1/credentials/apns.")
    }

    func credential(in stored: Credential) -> APNsCredential? {
        guard case .apns(let credential) = stored else { return nil }
        return credential
    }

    func push(_ payload: [UInt8], to binding: Binding, credential: APNsCredential, deadline: Date) async throws(PushRefusal) -> PushOutcome {
        guard let kind = APNsPushKind(bindingType: binding.type) else {
            throw PushRefusal(reason: "InternalError", description: "Not an APNs binding.")
        }
        let request: APNsRequest
        do {
            request = try APNsRequest(kind: kind, bundleID: credential.topic, deviceToken: binding.token, payload: payload, expiresAt: deadline)
        } catch {
            throw PushRefusal(reason: error.reason, description: error.description)
        }
        return await client.push(
            request, credential: credential, environment: binding.environment ?? .production,
            environmentIsCertain: binding.environmentIsExplicit, deadline: deadline)
    }
}
