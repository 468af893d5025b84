import Crypto
import Foundation
import RingRelayWire

/// Something that opens sealed boxes for the ``CallManager``: a ``SealedInviteOpener``, or the
/// ``RingRelayClient``, which makes one with the device's current bindings.
public protocol SealedInviteOpening: Sendable {
    /// Opens a box (base64) that a push or event of call `callId` carried; see
    /// ``SealedInviteOpener/open(_:callId:)``.
    func open(_ box: String, callId: String) async throws(SealedInviteRefusal) -> SealedCallPayload
}

/// Opens the sealed invites sent to this device: decrypts the box, authenticates its caller
/// against the key directory, and refuses it when it is for another call, expired, claims to
/// stay valid for too long, or was opened before.
///
/// ```swift
/// let opener = SealedInviteOpener(
///     identity: identity, bindingIds: [alertBindingId], senderKeys: client.keyDirectory,
///     replayStore: InviteReplayStore(fileURL: groupContainer.appending(path: "opened-invites.json")))
/// let payload = try await opener.open(box, callId: invite.callId)
/// ```
public struct SealedInviteOpener: SealedInviteOpening {
    /// This device.
    public let identity: SealedCallIdentity
    /// This device's bindings: a box for any other binding is refused (``SealedInviteRefusal/wrongBinding``).
    public let bindingIds: Set<String>
    /// Where callers' keys are looked up.
    public let senderKeys: any SenderKeyLookup
    /// The invites opened before.
    public let replayStore: InviteReplayStore
    /// The current time, against the `expiresAt` inside each box.
    public let now: @Sendable () -> Date

    /// The longest box accepted, base64: the server's own limit.
    public static let maximumBoxLength = 3072

    /// How far ahead of this device's clock an invite's `expiresAt` may be: a ring lasts at most
    /// 180 s, and the rest is room for the two devices' clocks to differ. A box valid for longer
    /// could be replayed for longer, and would hold its place in the replay store for longer.
    public static let maximumLifetime: Duration = .seconds(300)

    /// Creates an opener.
    public init(
        identity: SealedCallIdentity, bindingIds: Set<String>, senderKeys: any SenderKeyLookup, replayStore: InviteReplayStore,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.identity = identity
        self.bindingIds = bindingIds
        self.senderKeys = senderKeys
        self.replayStore = replayStore
        self.now = now
    }

    /// Opens a box (base64, as a push or event carries it).
    ///
    /// - Parameter callId: the call of the push or event that carried the box; the box must name it.
    /// - Returns: the invite, authenticated, for this call, unexpired and seen here for the first time.
    /// - Throws: why it was refused; see ``SealedInviteRefusal``.
    public func open(_ box: String, callId: String) async throws(SealedInviteRefusal) -> SealedCallPayload {
        guard box.utf8.count <= Self.maximumBoxLength, let bytes = Data(base64Encoded: box) else { throw .malformed }
        let outer = try SealedBox.openOuter(
            bytes, privateKey: identity.privateKey, accountId: identity.accountId, identity: identity.identity, bindingIds: bindingIds)
        let senderKey: P256.KeyAgreement.PublicKey?
        do {
            senderKey = try await senderKeys.publicKey(of: outer.senderIdentity, keyId: outer.senderKeyID)
        } catch {
            throw .senderKeysUnavailable
        }
        guard let senderKey else { throw .unknownSender }
        let plaintext = try outer.openInner(senderKey: senderKey)
        guard let payload = try? JSONDecoder.ringRelay.decode(SealedCallPayload.self, from: plaintext) else { throw .malformed }
        // The inner layer's info binds the outer names already; a payload naming someone else is
        // the caller's own inconsistency, refused all the same.
        guard payload.caller.identity == outer.senderIdentity, payload.caller.keyId == outer.senderKeyID else {
            throw .unauthenticatedSender
        }
        guard payload.callId == callId else { throw .wrongCall }
        let now = now()
        guard now < payload.expiresAt else { throw .expired(payload.expiresAt) }
        guard payload.expiresAt.timeIntervalSince(now) <= Self.maximumLifetime.seconds else { throw .expiresTooLate(payload.expiresAt) }
        let firstOpening: Bool
        do {
            firstOpening = try replayStore.recordFirstOpening(of: payload.inviteId, expiresAt: payload.expiresAt, now: now)
        } catch is InviteReplayStore.Full {
            throw .replayStoreFull
        } catch {
            throw .replayStateUnavailable
        }
        guard firstOpening else { throw .replayed }
        return payload
    }
}

extension SealedInviteOpening {
    /// Opens the sealed invite a push carries: a notification's `userInfo`, or a VoIP push's
    /// dictionary.
    ///
    /// - Throws: ``SealedInviteRefusal/malformed`` when the push has no sealed invite, else as
    ///   ``open(_:callId:)`` with the push's call id.
    public func openSealedInvite(userInfo: [AnyHashable: Any]) async throws(SealedInviteRefusal) -> SealedCallPayload {
        guard case .ringRelay(let invite) = PushParser.parse(userInfo), let box = invite.sealed else { throw .malformed }
        return try await open(box, callId: invite.callId)
    }
}
