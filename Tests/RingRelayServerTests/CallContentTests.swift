import Foundation
import RingRelayCore
import RingRelayWire
import Testing

@testable import RingRelayServer

/// What a native ring sends on each channel: the invite names the caller, picture included, and
/// sealed alert invites name nobody.
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
            for: Self.call(avatar: avatar), metadata: nil, calleeBusy: false, sealed: ["bnd_1": "AAAA"], sentAt: Self.now)
        let voip = try #require(content.apnsVoIP)
        struct VoIP: Decodable { var ringrelay: NativeInvite }
        let invite = try JSONDecoder.ringRelay.decode(VoIP.self, from: Data(voip)).ringrelay
        #expect(invite.from == .init(identity: "alice", displayName: "Alice", avatarUrl: avatar))
        let fcm = try #require(content.fcmData?[NativeInvite.payloadKey])
        #expect(try JSONDecoder.ringRelay.decode(NativeInvite.self, from: Data(fcm.utf8)).from?.avatarUrl == avatar)
        // The alert push of a sealed invite says nothing of the caller.
        let alert = String(decoding: try #require(content.apnsAlert["bnd_1"]), as: UTF8.self)
        #expect(!alert.contains("avatarUrl") && !alert.contains("alice"))
    }

    @Test func withoutAnAvatarTheInviteHasNoMember() throws {
        let content = CallService.content(for: Self.call(avatar: nil), metadata: nil, calleeBusy: false, sealed: [:], sentAt: Self.now)
        let voip = String(decoding: try #require(content.apnsVoIP), as: UTF8.self)
        #expect(voip.contains(#""from":{"displayName":"Alice","identity":"alice"}"#))
    }
}
