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

    /// One push's body and how APNs keeps it.
    struct Payload: Sendable {
        /// The JSON body.
        var body: [UInt8]
        /// `apns-collapse-id`: a later push with the same id replaces this one on the device.
        var collapseID: String?
        /// How long APNs may hold an alert for an offline device; the push's deadline when `nil`
        /// (a ring is of no use after it ends). VoIP pushes are never held.
        var expiresAt: Date?
    }

    func push(_ payload: Payload, to binding: Binding, credential: APNsCredential, deadline: Date) async throws(PushRefusal) -> PushOutcome {
        guard let kind = APNsPushKind(bindingType: binding.type) else {
            throw PushRefusal(reason: "InternalError", description: "Not an APNs binding.")
        }
        let request: APNsRequest
        do {
            request = try APNsRequest(
                kind: kind, bundleID: credential.topic, deviceToken: binding.token, payload: payload.body,
                expiresAt: payload.expiresAt ?? deadline, collapseID: payload.collapseID)
        } catch {
            throw PushRefusal(reason: error.reason, description: error.description)
        }
        return await client.push(
            request, credential: credential, environment: binding.environment ?? .production,
            environmentIsCertain: binding.environmentIsExplicit, deadline: deadline)
    }
}
