import Foundation
import RingRelayCore
import RingRelayFCM

/// FCM as a ``PushProvider``: a high-priority data message through ``FCMClient``.
struct FCMPushProvider: PushProvider {
    /// The FCM client; a long-lived service.
    let client: FCMClient
    /// The time source for the message's time to live.
    let clock: any WallClock

    var channel: PushChannel { .fcm }
    var credentialKind: CredentialKind { .fcm }
    var notConfigured: RingRelayError {
        RingRelayError(.conflict, code: .fcmNotConfigured, "The account has no FCM service account; upload it with PUT /v1/credentials/fcm.")
    }

    func credential(in stored: Credential) -> FCMCredential? {
        guard case .fcm(let credential) = stored else { return nil }
        return credential
    }

    func push(_ payload: [String: String], to binding: Binding, credential: FCMCredential, deadline: Date) async throws(PushRefusal)
        -> PushOutcome
    {
        let request: FCMRequest
        do {
            // android.ttl is the ring time left, so FCM drops a message that would arrive after the call.
            request = try FCMRequest(token: binding.token, data: payload, expiresAt: deadline, now: clock.now)
        } catch {
            throw PushRefusal(reason: error.reason, description: error.description)
        }
        return await client.push(request, credential: credential, deadline: deadline)
    }
}
