import Crypto
import Foundation
import RingRelayWire

/// Where a callee finds the public key of the caller a sealed invite names, to authenticate it.
public protocol SenderKeyLookup: Sendable {
    /// The key of one of `identity`'s devices with fingerprint `keyId`; `nil` when it has none.
    ///
    /// - Throws: when the answer cannot be had (the server is out of reach).
    func publicKey(of identity: String, keyId: DeviceKeyID) async throws -> P256.KeyAgreement.PublicKey?
}

/// The server's key directory (`GET /v1/identities/{identity}/keys`) as a ``SenderKeyLookup``:
/// ``RingRelayClient/keyDirectory`` gives one.
public struct KeyDirectoryLookup: SenderKeyLookup {
    private let fetch: @Sendable (String) async throws -> [DeviceKeyResource]

    /// Creates a lookup that reads an identity's keys with `fetch`.
    public init(fetch: @escaping @Sendable (String) async throws -> [DeviceKeyResource]) {
        self.fetch = fetch
    }

    /// Creates a lookup that asks the server, with a device access token: what a Notification
    /// Service Extension uses, which has no ``RingRelayClient``.
    public init(serverURL: URL, accessToken: @escaping @Sendable () async throws -> String, http: any HTTPTransport = URLSessionHTTPTransport()) {
        self.init(api: APIClient(baseURL: serverURL, deviceId: nil, http: http, tokens: AccessTokenCache(provider: accessToken)))
    }

    /// Creates a lookup on a client's REST connection. An identity the directory does not know
    /// (404 `identity_not_found`: no binding in the account) has no keys, so its invites are
    /// refused as from an unknown sender rather than for an unreachable directory.
    init(api: APIClient) {
        self.init { identity in
            do {
                return try await api.deviceKeys(of: identity).data
            } catch let error as RingRelayError where error.serverError?.code == .identityNotFound {
                return []
            }
        }
    }

    public func publicKey(of identity: String, keyId: DeviceKeyID) async throws -> P256.KeyAgreement.PublicKey? {
        try await fetch(identity).lazy.compactMap { P256.KeyAgreement.PublicKey(base64X963: $0.publicKey) }.first { DeviceKeyID(of: $0) == keyId }
    }
}
