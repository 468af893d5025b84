import Crypto
import Foundation
import RingRelayKit
import RingRelayTesting
import RingRelayWire

/// Alice calls Bob, both in account `acc_test`; Bob's device b1 has the alert binding `bnd_bob_alert`.
struct SealedWorld {
    static let account = "acc_test"
    static let bobBinding = "bnd_bob_alert"

    let directory: TemporaryDirectory
    let alice = SealedCallIdentity(accountId: account, identity: "alice", deviceId: "alice-phone", privateKey: .init())
    let bob = SealedCallIdentity(accountId: account, identity: "bob", deviceId: "bob-phone", privateKey: .init())
    let clock = TestClock(Dates.sent)

    init() throws { directory = try TemporaryDirectory(prefix: "ringrelay-sealed") }

    var bobAddress: SealedInviteAddress { SealedInviteAddress(accountId: Self.account, identity: "bob", bindingId: Self.bobBinding) }

    /// The key directory as it stands: Alice's and Bob's device keys.
    var directoryKeys: FixedSenderKeys {
        FixedSenderKeys(keys: ["alice": [alice.privateKey.publicKey], "bob": [bob.privateKey.publicKey]])
    }

    /// The call the tests' pushes and events carry.
    static let callId = "call_1"

    /// Alice's invite to Bob for call ``callId``, valid for 60 s from now.
    func payload(
        inviteId: String = UUID().uuidString, callId: String = SealedWorld.callId, displayName: String? = "Alice Liddell", lifetime: TimeInterval = 60
    ) -> SealedCallPayload {
        SealedCallPayload(
            inviteId: inviteId, callId: callId,
            caller: .init(identity: "alice", deviceId: alice.deviceId, keyId: alice.keyId, displayName: displayName),
            media: "video", metadata: .object(["room": .string("r-42")]), expiresAt: clock.now.addingTimeInterval(lifetime))
    }

    /// A box from Alice to Bob's alert binding.
    func box(_ payload: SealedCallPayload? = nil, address: SealedInviteAddress? = nil, by sender: SealedCallIdentity? = nil) throws -> String {
        try (sender ?? alice).seal(payload ?? self.payload(), to: bob.privateKey.publicKey, address: address ?? bobAddress)
    }

    /// Bob's opener, on the replay file `replays.json` (or another).
    func opener(
        senderKeys: (any SenderKeyLookup)? = nil, replayFile: String = "replays.json", identity: SealedCallIdentity? = nil,
        bindingIds: Set<String> = [bobBinding], replayCapacity: Int = 1024
    ) -> SealedInviteOpener {
        let clock = clock
        return SealedInviteOpener(
            identity: identity ?? bob, bindingIds: bindingIds, senderKeys: senderKeys ?? directoryKeys,
            replayStore: InviteReplayStore(fileURL: URL(fileURLWithPath: directory.appending(replayFile)), capacity: replayCapacity),
            now: { clock.now })
    }
}

/// A key directory held in memory.
struct FixedSenderKeys: SenderKeyLookup {
    var keys: [String: [P256.KeyAgreement.PublicKey]]

    func publicKey(of identity: String, keyId: DeviceKeyID) async throws -> P256.KeyAgreement.PublicKey? {
        keys[identity]?.first { DeviceKeyID(of: $0) == keyId }
    }
}

/// A key directory that answers every question with one key, whatever the key id: a directory
/// (or server) that vouches for a key the box was not made with.
struct VouchingSenderKeys: SenderKeyLookup {
    var key: P256.KeyAgreement.PublicKey

    func publicKey(of identity: String, keyId: DeviceKeyID) async throws -> P256.KeyAgreement.PublicKey? { key }
}

/// A key directory out of reach.
struct UnreachableSenderKeys: SenderKeyLookup {
    struct Unreachable: Error {}

    func publicKey(of identity: String, keyId: DeviceKeyID) async throws -> P256.KeyAgreement.PublicKey? { throw Unreachable() }
}

/// Opens a box carried by call `callId` and returns the refusal, or `nil` when it opened.
func refusal(_ opener: SealedInviteOpener, _ box: String, callId: String = SealedWorld.callId) async -> SealedInviteRefusal? {
    do {
        _ = try await opener.open(box, callId: callId)
        return nil
    } catch {
        return error
    }
}
