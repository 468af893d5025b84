import Foundation
import RingRelayCore
import RingRelayWire
import Testing

@testable import RingRelayServer

/// What a native ring sends on each channel: the invite names the caller, picture included, and a
/// sealed call's pushes carry each binding's own box and name nobody.
@Suite struct CallContentTests {
    private static let now = Date(timeIntervalSince1970: 1_893_499_200)

    private static func call(avatar: String?) -> Call {
        Call(
            id: "call_01jdxq7z5n8r2v6t4k3m9p0a1b", accountID: "acc_1", source: .native, caller: "alice", callerName: "Alice",
            callerAvatarURL: avatar, callee: "bob", state: .ringing, externalID: nil, createdAt: now, ringDeadline: now.addingTimeInterval(45),
            updatedAt: now)
    }

    @Test func theInviteCarriesTheCallersAvatarOnVoIPAndFCM() throws {
        let avatar = "https://cdn.example.com/u/alice.png?s=128"
        let content = CallService.content(
            for: Self.call(avatar: avatar), metadata: nil, calleeBusy: false, sealed: [], sentAt: Self.now)
        let voip = try #require(content.apnsVoIP)
        struct VoIP: Decodable { var ringrelay: NativeInvite }
        let invite = try JSONDecoder.ringRelay.decode(VoIP.self, from: Data(voip)).ringrelay
        #expect(invite.from == .init(identity: "alice", displayName: "Alice", avatarUrl: avatar))
        let fcm = try #require(content.fcmData?[NativeInvite.payloadKey])
        #expect(try JSONDecoder.ringRelay.decode(NativeInvite.self, from: Data(fcm.utf8)).from?.avatarUrl == avatar)
        #expect(content.sealedBindingIDs == nil)
    }

    @Test func aSealedCallsPushesCarryEachBindingsOwnBoxAndNothingAboutTheCaller() throws {
        func binding(_ id: String, _ type: BindingType, device: String?) -> Binding {
            Binding(
                id: id, accountID: "acc_1", identity: "bob", type: type, token: "t", environment: nil, deviceID: device, publicKey: "k",
                status: .active, invalidReason: nil, invalidatedAt: nil, registeredAt: Self.now, createdAt: Self.now, updatedAt: Self.now)
        }
        var call = Self.call(avatar: nil)
        call.callerName = nil
        call.isSealed = true
        let sealed = [
            (binding("bnd_voip", .apnsVoIP, device: "phone"), "Vm9JUA=="), (binding("bnd_alert", .apnsAlert, device: "phone"), "QWxlcnQ="),
            (binding("bnd_fcm", .fcm, device: "tablet"), "RkNN"), (binding("bnd_anon", .fcm, device: nil), "QW5vbg=="),
        ]
        // A terminal's `live` binding is never pushed: its box goes only to its live ring.
        let terminal = (binding("bnd_term", .live, device: "terminal"), "VGVybQ==")
        let content = CallService.content(for: call, metadata: nil, calleeBusy: true, sealed: sealed + [terminal], sentAt: Self.now)
        #expect(content.apnsVoIP == nil && content.fcmData == nil)
        #expect(content.sealedBindingIDs == ["bnd_voip", "bnd_alert", "bnd_fcm", "bnd_anon", "bnd_term"])
        let pushes = content.sealedPushes
        #expect(Set(pushes.keys) == ["bnd_voip", "bnd_alert", "bnd_fcm", "bnd_anon"])
        for (binding, box) in sealed {
            let invite: NativeInvite
            switch pushes[binding.id] {
            case .apns(let push)?:
                let body = try #require(try JSONSerialization.jsonObject(with: Data(push.body)) as? [String: Any])
                let aps = try #require(body["aps"] as? [String: Any])
                #expect(binding.type == .apnsAlert ? aps["alert"] != nil && aps["mutable-content"] as? Int == 1 : aps.isEmpty)
                struct Push: Decodable { var ringrelay: NativeInvite }
                invite = try JSONDecoder.ringRelay.decode(Push.self, from: Data(push.body)).ringrelay
                #expect(!String(decoding: push.body, as: UTF8.self).contains("alice"))
            case .fcm(let message)?:
                #expect(binding.type == .fcm)
                let text = try #require(message.data[NativeInvite.payloadKey])
                invite = try JSONDecoder.ringRelay.decode(NativeInvite.self, from: Data(text.utf8))
                #expect(!text.contains("alice"))
            case nil:
                Issue.record("no push for \(binding.id)")
                continue
            }
            #expect(invite.sealed == box)
            #expect(invite.callId == call.id)
            #expect(invite.from == nil && invite.media == nil && invite.metadata == nil)
            #expect(invite.calleeBusy == true)
        }
        // A connected device rings live with its first boxed binding's box; a binding without a
        // device has no live ring.
        #expect(content.sealedLive == ["phone": "Vm9JUA==", "tablet": "RkNN", "terminal": "VGVybQ=="])
    }

    @Test func withoutAnAvatarTheInviteHasNoMember() throws {
        let content = CallService.content(for: Self.call(avatar: nil), metadata: nil, calleeBusy: false, sealed: [], sentAt: Self.now)
        let voip = String(decoding: try #require(content.apnsVoIP), as: UTF8.self)
        #expect(voip.contains(#""from":{"displayName":"Alice","identity":"alice"}"#))
    }
}
