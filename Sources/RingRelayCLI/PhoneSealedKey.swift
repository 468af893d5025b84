import Foundation
import RingRelayKit

/// What the phone needs for sealed calls: its key file, and who it is, which a box names (the
/// account, identity and device of its access token).
struct PhoneSealedKey: Sendable {
    /// The key and the files beside it.
    let file: PhoneKeyFile
    /// This phone as boxes name it.
    let identity: SealedCallIdentity

    /// Reads the account, identity and device from a fresh access token.
    ///
    /// - Throws: when no token can be had, or the token does not carry them.
    init(file: PhoneKeyFile, signIn: PhoneSignIn) async throws {
        guard let claims = PhoneTokenClaims(token: try await signIn.accessToken()) else {
            throw PhoneKeyFile.Failure(description: "The access token does not name its account, identity and device, which sealed calls need.")
        }
        self.file = file
        identity = SealedCallIdentity(accountId: claims.acc, identity: claims.sub, deviceId: claims.did, privateKey: file.privateKey)
    }

    /// The SDK's sealed-call configuration, with the replay and known-keys files beside the key.
    func configuration(onDeviceKeysChanged: @escaping @Sendable (DeviceKeyChange) -> Void) -> SealedCallConfiguration {
        SealedCallConfiguration(
            identity: identity, replayStore: file.replayStore, knownKeys: file.knownKeys, onDeviceKeysChanged: onDeviceKeysChanged)
    }
}
