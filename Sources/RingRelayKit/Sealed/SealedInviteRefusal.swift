import Foundation

/// Why a sealed invite was not opened. A refused invite must not ring as the box describes it:
/// the SDK ends the call it stands for as failed, and a Notification Service Extension shows
/// nothing.
public enum SealedInviteRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not a sealed invite this SDK reads: not base64, too short, or an unknown version or suite.
    case malformed
    /// Sealed to another public key than this device's: the device's key changed since the caller
    /// fetched it (a reinstall), or the box was meant for another device.
    case wrongKey
    /// The box does not decrypt: a byte was changed, or it was sealed for another account or
    /// identity.
    case tampered
    /// Sealed for another binding of this device's key: the server delivered a box meant for a
    /// different binding.
    case wrongBinding
    /// Opened after the `expiresAt` inside the box (by this device's clock).
    case expired(Date)
    /// The `expiresAt` inside the box is further ahead of this device's clock than
    /// ``SealedInviteOpener/maximumLifetime``: an invite that would stay valid (and replayable)
    /// for longer than any ring.
    case expiresTooLate(Date)
    /// The box names another call than the push or event that carried it: a box of one call
    /// delivered in another.
    case wrongCall
    /// This invite was opened on this device before.
    case replayed
    /// The key directory has no key with the box's key id for the identity the box names as caller.
    case unknownSender
    /// The caller's key in the key directory did not make this box, or the box's inner caller
    /// does not match its outer one.
    case unauthenticatedSender
    /// The caller's key could not be fetched (the server is out of reach): the box cannot be
    /// authenticated now.
    case senderKeysUnavailable
    /// The record of opened invites could not be read or written, so a replay could not be ruled out.
    case replayStateUnavailable
    /// The record of opened invites holds ``InviteReplayStore/capacity`` invites that have not
    /// expired yet: forgetting one would let it be replayed, so new invites are refused until
    /// some expire (within ``SealedInviteOpener/maximumLifetime``).
    case replayStoreFull

    public var description: String {
        switch self {
        case .malformed: "The sealed invite is not a RingRelay sealed box (or uses a version or suite this SDK does not know)."
        case .wrongKey: "The sealed invite was sealed to another public key than this device's; register the current key again."
        case .tampered: "The sealed invite does not decrypt: it was changed, or sealed for another account or identity."
        case .wrongBinding: "The sealed invite was sealed for another binding of this device."
        case .expired(let date): "The sealed invite expired at \(date.formatted(.iso8601))."
        case .expiresTooLate(let date):
            "The sealed invite claims to be valid until \(date.formatted(.iso8601)), further ahead than an invite may be."
        case .wrongCall: "The sealed invite was made for another call than the one that carried it."
        case .replayed: "The sealed invite was opened on this device before."
        case .unknownSender: "The caller's key named in the sealed invite is not in the key directory."
        case .unauthenticatedSender: "The sealed invite was not made with the key of the caller it names."
        case .senderKeysUnavailable: "The caller's keys could not be fetched to authenticate the sealed invite."
        case .replayStateUnavailable: "The record of opened invites could not be read or written."
        case .replayStoreFull: "Too many unexpired invites were opened on this device; new ones are refused until some expire."
        }
    }
}
