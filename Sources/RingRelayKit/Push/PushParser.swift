import Foundation
import RingRelayWire

/// Reads push payloads of the three kinds RingRelay delivers: its own invites, Twilio Voice
/// notifications and Webex Calling `telephony_push` payloads, as APNs dictionaries or FCM data.
///
/// Parsing never fails: whatever cannot be read is ``PushContent/unrecognized(_:)``, because a
/// VoIP push must be reported as a call whatever it holds.
public enum PushParser {
    /// Parses a push dictionary as PushKit (`PKPushPayload.dictionaryPayload`) or
    /// `UNNotificationContent.userInfo` hand it over.
    public static func parse(_ dictionary: [AnyHashable: Any]) -> PushContent {
        guard let value = JSONValue(jsonObject: dictionary) else {
            return .unrecognized(UnrecognizedPush(reason: "The push is not a JSON object.", digest: digest(ofKeys: dictionary)))
        }
        return parse(value)
    }

    /// Parses a push payload given as JSON text.
    public static func parse(_ data: Data) -> PushContent {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: data) else {
            return .unrecognized(UnrecognizedPush(reason: "The push is not JSON.", digest: Data.digestHex(of: data)))
        }
        return parse(value)
    }

    /// Parses a push payload already read as JSON.
    public static func parse(_ value: JSONValue) -> PushContent {
        guard let object = value.objectValue else {
            return unrecognized("The push is not a JSON object.", value)
        }
        if let invite = object[NativeInvite.payloadKey] {
            return ringRelay(invite, in: value)
        }
        if object["twi_message_type"] != nil {
            return twilio(value)
        }
        if let webex = webex(value) {
            return .webex(webex)
        }
        return unrecognized("The push has no ringrelay, twi_message_type, bsft or webhookTelephonyPush member.", value)
    }

    /// Parses the payload of a `call.notification` event, where the server names the provider.
    static func parse(providerPayload payload: JSONValue, provider: String?) -> PushContent {
        switch provider {
        case "twilio": return twilio(payload)
        case "webex":
            guard payload.objectValue != nil else { return unrecognized("The Webex payload is not a JSON object.", payload) }
            return .webex(webex(payload) ?? webexNotification(payload))
        default: return parse(payload)
        }
    }

    // MARK: RingRelay

    private static func ringRelay(_ member: JSONValue, in push: JSONValue) -> PushContent {
        var invite = member
        // FCM data values are strings: the invite arrives as JSON text.
        if case .string(let text) = member {
            guard let decoded = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
                return unrecognized("The ringrelay member is a string but not JSON.", push)
            }
            invite = decoded
        }
        do {
            let decoded = try JSONDecoder.ringRelay.decode(NativeInvite.self, from: invite.canonicalData)
            guard !decoded.callId.isEmpty else { return unrecognized("The ringrelay invite has an empty callId.", push) }
            return .ringRelay(decoded)
        } catch {
            return unrecognized("The ringrelay invite is malformed: \(error)", push)
        }
    }

    // MARK: Twilio

    private static func twilio(_ push: JSONValue) -> PushContent {
        guard let object = push.objectValue else { return unrecognized("The Twilio payload is not a JSON object.", push) }
        let messageType = object["twi_message_type"]?.stringValue
        guard messageType == TwilioNotification.callMessageType || messageType == TwilioNotification.cancelMessageType,
            let messageType
        else {
            return unrecognized("Unknown twi_message_type.", push)
        }
        guard let callSid = object["twi_call_sid"]?.stringValue, !callSid.isEmpty else {
            return unrecognized("The Twilio payload has no twi_call_sid.", push)
        }
        let notification = TwilioNotification(
            messageType: messageType, callSid: callSid, from: object["twi_from"]?.stringValue, to: object["twi_to"]?.stringValue,
            accountSid: object["twi_account_sid"]?.stringValue, messageId: object["twi_message_id"]?.stringValue,
            customParameters: customParameters(object["twi_params"]?.stringValue), payload: push)
        return messageType == TwilioNotification.callMessageType ? .twilioCall(notification) : .twilioCancel(notification)
    }

    /// Decodes `twi_params`, URL-encoded `name=value` pairs joined by `&`.
    private static func customParameters(_ encoded: String?) -> [String: String] {
        guard let encoded, !encoded.isEmpty else { return [:] }
        var parameters: [String: String] = [:]
        for pair in encoded.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                let spaced = text.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            guard let name = parts.first.map(decode), !name.isEmpty else { continue }
            parameters[name] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return parameters
    }

    // MARK: Webex

    /// Recognises a Webex payload by what Webex's own samples read or add:
    /// - `bsft` (an object): the APNs `apnsPayload`; Webex's iOS sample reads `bsft.sender`;
    /// - `webhookTelephonyPush` (JSON text): FCM data as Cisco's sample forwarder sends it;
    /// - `content-available` beside `aps`: the VoIP push Cisco's sample forwarder builds.
    private static func webex(_ push: JSONValue) -> WebexNotification? {
        guard let object = push.objectValue else { return nil }
        if case .object = object["bsft"] {
            return webexNotification(push)
        }
        if case .string(let text) = object["webhookTelephonyPush"],
            let inner = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)), inner.objectValue != nil
        {
            return webexNotification(inner)
        }
        if object["content-available"] != nil, object["aps"] != nil {
            return webexNotification(push)
        }
        return nil
    }

    private static func webexNotification(_ payload: JSONValue) -> WebexNotification {
        var identifying = payload.objectValue ?? [:]
        identifying["aps"] = nil
        identifying["content-available"] = nil
        return WebexNotification(
            payload: payload, sender: payload["bsft"]?["sender"]?.stringValue, digest: JSONValue.object(identifying).digest)
    }

    // MARK: Unrecognized

    private static func unrecognized(_ reason: String, _ push: JSONValue) -> PushContent {
        .unrecognized(UnrecognizedPush(reason: reason, digest: push.digest))
    }

    /// A digest for a dictionary that is not JSON: its keys, which are all that can be read.
    private static func digest(ofKeys dictionary: [AnyHashable: Any]) -> String {
        Data.digestHex(of: Data(dictionary.keys.map { String(describing: $0.base) }.sorted().joined(separator: "\u{0}").utf8))
    }
}
