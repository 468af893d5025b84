import Foundation
import RingRelayWire

/// A push payload, understood: what ``PushParser`` makes of a push dictionary.
public enum PushContent: Sendable, Hashable {
    /// A RingRelay call invite (the `ringrelay` member).
    case ringRelay(NativeInvite)
    /// A Twilio incoming call (`twi_message_type` = `twilio.voice.call`).
    case twilioCall(TwilioNotification)
    /// A Twilio cancellation (`twi_message_type` = `twilio.voice.cancel`), which older Twilio
    /// setups still send by VoIP push.
    case twilioCancel(TwilioNotification)
    /// A Webex Calling incoming call (`telephony_push`).
    case webex(WebexNotification)
    /// Anything else: it must still be reported as a call, and ended at once.
    case unrecognized(UnrecognizedPush)

    /// The call the push is about.
    public var key: CallKey {
        switch self {
        case .ringRelay(let invite): .ringRelay(callId: invite.callId)
        case .twilioCall(let notification), .twilioCancel(let notification): .twilio(callSid: notification.callSid)
        case .webex(let notification): .webex(payloadDigest: notification.digest)
        case .unrecognized(let push): .unrecognized(payloadDigest: push.digest)
        }
    }
}

/// A Twilio Voice notification: the webhook body Twilio sent, forwarded unchanged.
public struct TwilioNotification: Sendable, Hashable {
    /// `twilio.voice.call` or `twilio.voice.cancel`.
    public var messageType: String
    /// `twi_call_sid`: the call.
    public var callSid: String
    /// `twi_from`, as Twilio writes it (`client:alice`, or a phone number).
    public var from: String?
    /// `twi_to`, as Twilio writes it (`client:bob`).
    public var to: String?
    /// `twi_account_sid`.
    public var accountSid: String?
    /// `twi_message_id`: unique per notification.
    public var messageId: String?
    /// `twi_params`, decoded: the custom parameters of the call.
    public var customParameters: [String: String]
    /// The whole payload, unchanged, for `TwilioVoiceSDK.handleNotification(_:delegate:delegateQueue:)`.
    public var payload: JSONValue

    /// The message type of an invite.
    public static let callMessageType = "twilio.voice.call"
    /// The message type of a cancellation.
    public static let cancelMessageType = "twilio.voice.cancel"

    /// The caller, with Twilio's `client:` prefix removed.
    public var caller: CallParty {
        guard let from, !from.isEmpty else { return .unknown }
        let identity = from.hasPrefix("client:") ? String(from.dropFirst("client:".count)) : from
        return CallParty(identity: identity, displayName: customParameters["displayName"])
    }
}

/// A Webex Calling `telephony_push`: the `apnsPayload` (iOS) or `fcmPayload` (Android) of the
/// webhook, forwarded unchanged.
///
/// Webex does not document the inner keys; its own iOS sample reads the caller from
/// `bsft.sender`, and everything else is for `webex.phone.processPushNotification(message:)`.
public struct WebexNotification: Sendable, Hashable {
    /// The payload for the Webex SDK: the push dictionary, or for FCM the parsed
    /// `webhookTelephonyPush` object.
    public var payload: JSONValue
    /// `bsft.sender`, when present.
    public var sender: String?
    /// A digest of the payload without the keys push transport adds (`aps`, `content-available`),
    /// so the same call seen twice has the same key.
    public var digest: String

    /// The caller, as far as the payload names one.
    public var caller: CallParty {
        guard let sender, !sender.isEmpty else { return .unknown }
        return CallParty(identity: sender)
    }
}

/// A push that names no call this SDK can ring.
public struct UnrecognizedPush: Sendable, Hashable {
    /// What is wrong with it, for logs.
    public var reason: String
    /// A digest of its content, so the same push seen twice keeps its UUID.
    public var digest: String
}
