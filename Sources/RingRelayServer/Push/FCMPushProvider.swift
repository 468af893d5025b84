import Foundation
import RingRelayCore
import RingRelayFCM

/// FCM as a ``PushProvider``: a high-priority data message (or a notification message) through
/// ``FCMClient``.
struct FCMPushProvider: PushProvider {
    /// The FCM client; a long-lived service.
    let client: FCMClient
    /// The time source for the message's time to live.
    let clock: any WallClock
    /// The hosts a service account's `token_uri` may name (see ``CredentialValidator/fcm(_:tokenHosts:)``):
    /// checked again before each use, since a service account stored by an older version was not.
    let tokenHosts: Set<String>

    var channel: PushChannel { .fcm }
    var credentialKind: CredentialKind { .fcm }
    var notConfigured: RingRelayError {
        RingRelayError(.conflict, code: .fcmNotConfigured, "The account has no FCM service account; upload it with PUT /v1/credentials/fcm.")
    }

    func credential(in stored: Credential) -> FCMCredential? {
        guard case .fcm(let credential) = stored else { return nil }
        return credential
    }

    /// One message's data, and what it shows.
    struct Payload: Sendable {
        /// The data; every value a string.
        var data: [String: String]
        /// A notification to show (a missed call); `nil` for a ring, which the app presents itself.
        var notice: FCMRequest.Notice?
        /// How long FCM may hold the message for an offline device; the push's deadline when `nil`.
        var expiresAt: Date?
    }

    func push(_ payload: Payload, to binding: Binding, credential: FCMCredential, deadline: Date) async throws(PushRefusal)
        -> PushOutcome
    {
        guard CredentialValidator.isAllowedTokenURI(credential.tokenURI, hosts: tokenHosts) else {
            throw PushRefusal(
                reason: "TokenURINotAllowed", description: "the service account's token_uri is not Google's; upload the service account again",
                disposition: .fixConfiguration)
        }
        let request: FCMRequest
        do {
            // android.ttl is by default the ring time left, so FCM drops a message that would arrive after the call.
            request = try FCMRequest(
                token: binding.token, data: payload.data, notice: payload.notice, expiresAt: payload.expiresAt ?? deadline, now: clock.now)
        } catch {
            throw PushRefusal(reason: error.reason, description: error.description)
        }
        return await client.push(request, credential: credential, deadline: deadline)
    }
}
