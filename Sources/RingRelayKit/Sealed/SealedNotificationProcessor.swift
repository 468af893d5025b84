import Foundation
import RingRelayWire

/// What a Notification Service Extension does with one notification.
public enum SealedNotificationOutcome: Sendable, Hashable {
    /// A sealed invite, opened: report this VoIP payload to CallKit
    /// (`CXProvider.reportNewIncomingVoIPPushPayload`), then show nothing. The system hands the
    /// payload to the app's `PKPushRegistryDelegate` as a VoIP push, which ``PushKitHandler``
    /// rings as any RingRelay invite.
    case reportCall(JSONValue)
    /// A sealed invite that was refused: show nothing, report nothing.
    case suppress(SealedInviteRefusal)
    /// Not a sealed invite: leave the notification as it is.
    case passThrough
}

/// The platform-neutral half of the Notification Service Extension helper
/// (``SealedCallNotificationHandler`` on iOS): decides what becomes of a notification.
public struct SealedNotificationProcessor: Sendable {
    /// Opens the boxes.
    public let opener: any SealedInviteOpening

    /// Creates a processor.
    public init(opener: any SealedInviteOpening) {
        self.opener = opener
    }

    /// Decides what becomes of a notification's `userInfo`.
    public func process(_ userInfo: [AnyHashable: Any]) async -> SealedNotificationOutcome {
        await process(PushParser.parse(userInfo))
    }

    /// Decides what becomes of a parsed notification.
    public func process(_ content: PushContent) async -> SealedNotificationOutcome {
        guard case .ringRelay(let invite) = content, let box = invite.sealed else { return .passThrough }
        do {
            let payload = try await opener.open(box, callId: invite.callId)
            return .reportCall(Self.voipPayload(invite: invite, opened: payload))
        } catch {
            return .suppress(error)
        }
    }

    /// The VoIP payload CallKit hands to the app: the RingRelay invite in clear, as the server
    /// would have sent it for an unsealed call. Only JSON types, which are all `NSSecureCoding`
    /// as `reportNewIncomingVoIPPushPayload` requires. It rings until the earlier of the
    /// server's and the caller's expiry.
    static func voipPayload(invite: NativeInvite, opened payload: SealedCallPayload) -> JSONValue {
        let clear = NativeInvite(
            callId: invite.callId,
            from: NativeInvite.Caller(
                identity: payload.caller.identity, displayName: payload.caller.displayName, avatarUrl: payload.caller.avatarUrl),
            media: payload.media, sentAt: invite.sentAt, expiresAt: min(invite.expiresAt, payload.expiresAt), metadata: payload.metadata,
            calleeBusy: invite.calleeBusy)
        // A NativeInvite always encodes, and its JSON always reads back as a JSONValue.
        let data = (try? JSONEncoder.ringRelay.encode(clear)) ?? Data()
        let invite = (try? JSONDecoder().decode(JSONValue.self, from: data)) ?? .null
        return .object(["aps": .object([:]), NativeInvite.payloadKey: invite])
    }
}
