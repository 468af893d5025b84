import Foundation

/// The `ringrelay` member of a native call's push: what a device needs to show the call before it
/// has a live connection.
///
/// VoIP push (`apns_voip`):
/// ```json
/// {"aps":{},"ringrelay":{"v":1,"callId":"call_…","from":{"identity":"alice","displayName":"Alice",
///  "avatarUrl":"https://…"},"media":"audio","sentAt":"…","expiresAt":"…","metadata":{}}}
/// ```
/// FCM (`fcm`) carries the same object as a JSON string under the data key `ringrelay`. A sealed
/// call's push, of any kind (an alert push to a Notification Service Extension, a VoIP push, an
/// FCM message), carries only `v`, `callId`, `sealed`, `sentAt`, `expiresAt` and `calleeBusy`: who is
/// calling is inside the sealed box.
public struct NativeInvite: Sendable, Hashable, Codable {
    /// The caller.
    public struct Caller: Sendable, Hashable, Codable {
        /// The caller's identity.
        public var identity: String
        /// The name to show, when the caller gave one.
        public var displayName: String?
        /// The caller's picture, an `https` URL, when the caller gave one. A device checks it with
        /// ``AvatarURLRules`` before using it, as it would any text a push brings.
        public var avatarUrl: String?

        enum CodingKeys: String, CodingKey { case identity, displayName, avatarUrl }

        /// Creates a caller.
        public init(identity: String, displayName: String? = nil, avatarUrl: String? = nil) {
            self.identity = identity
            self.displayName = displayName
            self.avatarUrl = avatarUrl
        }

        /// Reads a caller. An `avatarUrl` that is not a string is dropped rather than failing the
        /// invite: a call must ring even when its decoration is wrong.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            identity = try container.decode(String.self, forKey: .identity)
            displayName = try container.decodeIfPresent(String.self, forKey: .displayName)
            avatarUrl = try? container.decodeIfPresent(String.self, forKey: .avatarUrl)
        }
    }

    /// Payload version; this is version 1.
    public var v: Int
    /// The call.
    public var callId: String
    /// The caller; absent in a sealed invite.
    public var from: Caller?
    /// `audio` or `video`; absent in a sealed invite.
    public var media: String?
    /// When the server sent the push.
    public var sentAt: Date
    /// When ringing stops: a push that arrives later must not ring.
    public var expiresAt: Date
    /// The caller's metadata, unchanged.
    public var metadata: JSONValue?
    /// The callee is already in an accepted call.
    public var calleeBusy: Bool?
    /// The sealed box for a Notification Service Extension, base64.
    public var sealed: String?

    /// The key of the invite in the push payload (APNs) or the data map (FCM).
    public static let payloadKey = "ringrelay"

    /// Creates an invite.
    public init(
        v: Int = 1, callId: String, from: Caller?, media: String?, sentAt: Date, expiresAt: Date, metadata: JSONValue? = nil,
        calleeBusy: Bool? = nil, sealed: String? = nil
    ) {
        self.v = v
        self.callId = callId
        self.from = from
        self.media = media
        self.sentAt = sentAt
        self.expiresAt = expiresAt
        self.metadata = metadata
        self.calleeBusy = calleeBusy
        self.sealed = sealed
    }
}
