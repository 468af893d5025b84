import Foundation
import RingRelayWire

/// What a sealed invite says, once opened: everything about the call the server never sees.
///
/// The caller's SDK writes it (``RingRelayClient/startCall(to:sealed:media:displayName:avatarURL:metadata:options:)``);
/// the callee's SDK reads it from the box (``SealedInviteOpener/open(_:)``).
public struct SealedCallPayload: Sendable, Hashable, Codable {
    /// The caller, as the box names it. Its identity and key are checked against the key
    /// directory when the box is opened.
    public struct Caller: Sendable, Hashable, Codable {
        /// The caller's identity.
        public var identity: String
        /// The caller's device.
        public var deviceId: String
        /// The caller device's public key, by fingerprint: the key the box is authenticated with.
        public var keyId: DeviceKeyID
        /// The name to show.
        public var displayName: String?
        /// The caller's picture, an `https` URL; checked with ``AvatarURLRules`` before use.
        public var avatarUrl: String?

        /// Creates a caller.
        public init(identity: String, deviceId: String, keyId: DeviceKeyID, displayName: String? = nil, avatarUrl: String? = nil) {
            self.identity = identity
            self.deviceId = deviceId
            self.keyId = keyId
            self.displayName = displayName
            self.avatarUrl = avatarUrl
        }
    }

    /// Made by the caller's SDK, one per call (the same in every box of the call): the callee's
    /// devices remember it to refuse a box seen before.
    public var inviteId: String
    /// The call the invite is for (`call_…`): the caller's SDK picks the call's id and places the
    /// call with it (`POST /v1/calls` with `callId`), and the callee's SDK refuses a box that a
    /// push or event of another call carries (``SealedInviteRefusal/wrongCall``). Without it, a
    /// box seen once could ring again in a call of the server's making.
    public var callId: String
    /// Who calls.
    public var caller: Caller
    /// `audio` or `video`.
    public var media: String
    /// The caller's metadata, unchanged.
    public var metadata: JSONValue?
    /// When the invite stops being valid, by the caller's clock: a box opened later is refused,
    /// whatever the server says, and so is one whose expiry is further ahead than
    /// ``SealedInviteOpener/maximumLifetime``.
    public var expiresAt: Date

    /// Creates a payload.
    public init(inviteId: String, callId: String, caller: Caller, media: String, metadata: JSONValue? = nil, expiresAt: Date) {
        self.inviteId = inviteId
        self.callId = callId
        self.caller = caller
        self.media = media
        self.metadata = metadata
        self.expiresAt = expiresAt
    }
}
