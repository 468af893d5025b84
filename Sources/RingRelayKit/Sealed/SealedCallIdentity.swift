import Crypto
import Foundation
import RingRelayWire

/// This device as sealed calls know it: its account, identity and device, and its P-256 key,
/// which callers seal invites to and which authenticates the invites it seals.
///
/// Keep the private key in the keychain, in an access group the Notification Service Extension
/// shares, and register its public half with every binding (``publicKeyBase64``).
public struct SealedCallIdentity: Sendable {
    /// The account (`acc_…`), as the app's backend knows it.
    public var accountId: String
    /// This device's identity.
    public var identity: String
    /// This device's id, as in its access tokens.
    public var deviceId: String
    /// The device's key.
    public var privateKey: P256.KeyAgreement.PrivateKey

    /// Creates an identity.
    public init(accountId: String, identity: String, deviceId: String, privateKey: P256.KeyAgreement.PrivateKey) {
        self.accountId = accountId
        self.identity = identity
        self.deviceId = deviceId
        self.privateKey = privateKey
    }

    /// The public key as a binding registers it (`publicKey` of ``RingRelayClient/register(pushToken:type:environment:publicKey:)``).
    public var publicKeyBase64: String { privateKey.publicKey.base64X963 }

    /// The public key's fingerprint.
    public var keyId: DeviceKeyID { DeviceKeyID(of: privateKey.publicKey) }

    /// Seals `payload` to one callee binding's key.
    ///
    /// - Returns: the box, base64, as `sealed[].box` of `POST /v1/calls` carries it.
    /// - Throws: when an id is too long to encode, or the key is unusable.
    public func seal(_ payload: SealedCallPayload, to recipientKey: P256.KeyAgreement.PublicKey, address: SealedInviteAddress) throws -> String {
        let plaintext = try JSONEncoder.ringRelay.encode(payload)
        return try SealedBox.seal(plaintext, from: (identity, privateKey), to: recipientKey, address: address).base64EncodedString()
    }
}
