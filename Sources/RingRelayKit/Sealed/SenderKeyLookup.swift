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

    public func publicKey(of identity: String, keyId: DeviceKeyID) async throws -> P256.KeyAgreement.PublicKey? {
        try await fetch(identity).lazy.compactMap { P256.KeyAgreement.PublicKey(base64X963: $0.publicKey) }.first { DeviceKeyID(of: $0) == keyId }
    }
}
