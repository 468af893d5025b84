import Foundation
import RingRelayKit
import RingRelayWire
import Testing

@Suite("Push payloads")
struct PushParsingTests {
    @Test("A Twilio call push (fixture) is a Twilio call keyed by its call SID")
    func twilioCall() throws {
        let content = PushParser.parse(try Fixture.dictionary("voip-push-call-shape"))
        guard case .twilioCall(let notification) = content else {
            Issue.record("expected a Twilio call, got \(content)")
            return
        }
        #expect(notification.callSid == "CAxxxx")
        #expect(notification.caller == CallParty(identity: "alice"))
        #expect(notification.to == "client:bob")
        #expect(notification.accountSid == "ACxxxx")
        #expect(notification.payload["twi_bridge_token"]?.stringValue == "eyJraxxxx")
        #expect(content.key == .twilio(callSid: "CAxxxx"))
    }

    @Test("The real 2017 Twilio cancel push is a cancel for the same key as its call")
    func twilioCancel() throws {
        let content = PushParser.parse(try Fixture.data("voip-push-cancel-real-2017"))
        guard case .twilioCancel(let notification) = content else {
            Issue.record("expected a Twilio cancel, got \(content)")
            return
        }
        #expect(notification.callSid == "CA89c68e8530b32dc78a01855feade80d2")
        #expect(notification.caller.identity == "expert_2237_2e5538201f3f39120d8af2a1a31fe523")
        #expect(content.key.uuid == CallKey.twilio(callSid: "CA89c68e8530b32dc78a01855feade80d2").uuid)
    }

    @Test("The Twilio webhook body, as a call.notification event carries it, parses without aps")
    func twilioWebhookBody() throws {
        let content = PushParser.parse(try Fixture.json("call-notification-webhook-body"))
        guard case .twilioCall(let notification) = content else {
            Issue.record("expected a Twilio call, got \(content)")
            return
        }
        #expect(notification.messageId == "WBxxxx")
    }

    @Test("twi_params are decoded; a displayName parameter names the caller")
    func twilioCustomParameters() {
        let content = PushParser.parse(
            .object([
                "twi_message_type": .string("twilio.voice.call"), "twi_call_sid": .string("CA1"), "twi_from": .string("client:alice"),
                "twi_params": .string("displayName=Alice+Smith&room=r%2F1&flag"),
            ]))
        guard case .twilioCall(let notification) = content else {
            Issue.record("expected a Twilio call, got \(content)")
            return
        }
        #expect(notification.customParameters == ["displayName": "Alice Smith", "room": "r/1", "flag": ""])
        #expect(notification.caller == CallParty(identity: "alice", displayName: "Alice Smith"))
    }

    @Test("Twilio payloads without a call SID or with an unknown message type are unrecognized")
    func twilioMalformed() throws {
        var noSid = try Fixture.dictionary("voip-push-call-shape")
        noSid["twi_call_sid"] = nil
        var unknownType = try Fixture.dictionary("voip-push-call-shape")
        unknownType["twi_message_type"] = "twilio.voice.reject"
        for dictionary in [noSid, unknownType] {
            guard case .unrecognized = PushParser.parse(dictionary) else {
                Issue.record("expected unrecognized for \(dictionary)")
                continue
            }
        }
    }

    @Test("A native VoIP push (fixture) is a RingRelay invite")
    func nativeVoIP() throws {
        let content = PushParser.parse(try Fixture.dictionary("ringrelay-voip-push"))
        guard case .ringRelay(let invite) = content else {
            Issue.record("expected an invite, got \(content)")
            return
        }
        #expect(invite.callId == "call_01JDXQ7Z5N8R2V6T4K3M9P0A1B")
        #expect(invite.from == NativeInvite.Caller(identity: "alice", displayName: "Alice"))
        #expect(invite.media == "video")
        #expect(invite.expiresAt == Dates.sent.addingTimeInterval(45))
        #expect(invite.metadata == .object(["room": .string("standup")]))
        #expect(content.key == .ringRelay(callId: "call_01JDXQ7Z5N8R2V6T4K3M9P0A1B"))
    }

    @Test("FCM carries the invite as JSON text; it parses to the same call")
    func nativeFCM() throws {
        let content = PushParser.parse(try Fixture.dictionary("ringrelay-fcm-data"))
        guard case .ringRelay(let invite) = content else {
            Issue.record("expected an invite, got \(content)")
            return
        }
        #expect(invite.calleeBusy == true)
        #expect(content.key == PushParser.parse(try Fixture.dictionary("ringrelay-voip-push")).key)
    }

    @Test("A malformed ringrelay member is unrecognized, not a crash")
    func nativeMalformed() {
        let samples: [[AnyHashable: Any]] = [
            ["ringrelay": "not json"],
            ["ringrelay": ["v": 1, "callId": "call_1"]],
            ["ringrelay": ["v": 1, "callId": "", "sentAt": Make.iso(Dates.sent), "expiresAt": Make.iso(Dates.expired)]],
            ["ringrelay": 42],
        ]
        for sample in samples {
            guard case .unrecognized(let push) = PushParser.parse(sample) else {
                Issue.record("expected unrecognized for \(sample)")
                continue
            }
            #expect(!push.reason.isEmpty)
        }
    }

    @Test("A Webex VoIP push is recognised by bsft, and names the sender")
    func webexBsft() throws {
        let content = PushParser.parse(try Fixture.dictionary("webex-voip-push-bsft.constructed"))
        guard case .webex(let notification) = content else {
            Issue.record("expected Webex, got \(content)")
            return
        }
        #expect(notification.caller == CallParty(identity: "+14155550123"))
        #expect(notification.payload["bsft"]?["sender"]?.stringValue == "+14155550123")
    }

    @Test("Cisco's sample forwarder VoIP shape (content-available beside aps) is Webex")
    func webexForwarderShape() throws {
        let content = PushParser.parse(try Fixture.dictionary("pushserver-apns-voip-rawcontent.synthetic"))
        guard case .webex(let notification) = content else {
            Issue.record("expected Webex, got \(content)")
            return
        }
        #expect(notification.caller == CallParty(identity: "unknown", displayName: "Unknown caller"))
    }

    @Test("FCM webhookTelephonyPush carries the webhook's fcmPayload as JSON text")
    func webexFCM() throws {
        let envelope = try Fixture.json("telephony-push-notification.synthetic")
        let fcmPayload = try #require(envelope["data"]?["fcmPayload"])
        let text = String(decoding: try JSONEncoder().encode(fcmPayload), as: UTF8.self)
        let content = PushParser.parse(["webhookTelephonyPush": text])
        guard case .webex(let notification) = content else {
            Issue.record("expected Webex, got \(content)")
            return
        }
        #expect(notification.payload == fcmPayload)
        // The fixture's placeholder text is not JSON: that push is unrecognized.
        guard case .unrecognized = PushParser.parse(try Fixture.dictionary("pushserver-fcm-data.synthetic")) else {
            Issue.record("a non-JSON webhookTelephonyPush must be unrecognized")
            return
        }
    }

    @Test("The same Webex payload keeps its key whatever transport keys were added")
    func webexKeyIgnoresTransportKeys() throws {
        let envelope = try Fixture.json("telephony-push-notification.synthetic")
        var apns: [String: JSONValue] = try #require(envelope["data"]?["apnsPayload"]?.objectValue)
        apns["bsft"] = JSONValue.object(["sender": .string("alice")])
        let plain = PushParser.parse(.object(apns))
        apns["aps"] = JSONValue.object([:])
        apns["content-available"] = JSONValue.number(1)
        let forwarded = PushParser.parse(.object(apns))
        #expect(plain.key == forwarded.key)
    }

    @Test("Anything else is unrecognized, with a stable key")
    func unrecognized() throws {
        let envelope = try Fixture.dictionary("telephony-push-notification.synthetic")
        let first = PushParser.parse(envelope)
        guard case .unrecognized = first else {
            Issue.record("a webhook envelope is not a push")
            return
        }
        #expect(PushParser.parse(envelope).key == first.key)
        guard case .unrecognized = PushParser.parse(Data("not json".utf8)) else {
            Issue.record("bytes that are not JSON are unrecognized")
            return
        }
        guard case .unrecognized = PushParser.parse(["aps": ["alert": "hi"], 7: "x"] as [AnyHashable: Any]) else {
            Issue.record("a non-string key makes the push unreadable")
            return
        }
    }

    @Test("Call UUIDs are name-based (RFC 9562 version 8), stable, and distinct per call")
    func uuids() {
        let first = CallKey.ringRelay(callId: "call_1").uuid
        #expect(first == CallKey.ringRelay(callId: "call_1").uuid)
        #expect(first != CallKey.ringRelay(callId: "call_2").uuid)
        #expect(first != CallKey.twilio(callSid: "call_1").uuid)
        let bytes = first.uuid
        #expect(bytes.6 >> 4 == 8)
        #expect(bytes.8 >> 6 == 0b10)
    }

    @Test("End reasons carry CXCallEndedReason's raw values")
    func endReasonRawValues() throws {
        let fixture = try JSONDecoder().decode([String: Int].self, from: Fixture.data("cxcallendedreason"))
        let ours = Dictionary(uniqueKeysWithValues: CallEndReason.allCases.map { ("\($0)", $0.rawValue) })
        #expect(ours == fixture)
    }
}
