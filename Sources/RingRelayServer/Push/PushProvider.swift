import Foundation
import RingRelayCore

/// One push service, as ``BindingPusher`` uses it: finds the account's credential for it and sends
/// one payload to one binding.
///
/// Credential lookup, disposition handling and logging are ``BindingPusher``'s, written once for
/// every provider; a provider only builds its request and sends it.
protocol PushProvider: Sendable {
    /// What the provider sends: APNs takes the JSON body, FCM string data.
    associatedtype Payload: Sendable
    /// The account credential the provider needs.
    associatedtype ProviderCredential: Sendable

    /// The channel this provider pushes on (faults, logs, the test-push answer).
    var channel: PushChannel { get }
    /// The kind of account credential to look up.
    var credentialKind: CredentialKind { get }
    /// The error when the account has no credential of ``credentialKind``.
    var notConfigured: RingRelayError { get }

    /// The provider's credential inside a stored one, or `nil` when it is of another kind.
    func credential(in stored: Credential) -> ProviderCredential?

    /// Sends `payload` to `binding`, retrying within `deadline`.
    ///
    /// - Returns: the outcome; failures are outcomes with a disposition, never thrown.
    /// - Throws: ``PushRefusal`` when the request cannot be built (too large, bad token), before
    ///   anything is sent.
    func push(_ payload: Payload, to binding: Binding, credential: ProviderCredential, deadline: Date) async throws(PushRefusal)
        -> PushOutcome
}
