import Foundation
import RingRelayKit
import RingRelayWire
import Testing

/// The caller's picture (`avatarUrl`): read from pushes and live events, and trusted only when it
/// is an `https` URL the server would have relayed.
@Suite("Caller presentation")
struct CallerPresentationTests {
    let ui = RecordingSystemUI()

    @Test("from.avatarUrl of a native invite is read, and the ringing call shows it")
    func pushAvatar() throws {
        let push = Make.invite("call_a", avatarUrl: "https://cdn.example.com/u/alice.png?s=128")
        guard case .ringRelay(let invite) = PushParser.parse(push) else {
            Issue.record("expected an invite")
            return
        }
        #expect(invite.from == NativeInvite.Caller(identity: "alice", displayName: "Alice", avatarUrl: "https://cdn.example.com/u/alice.png?s=128"))
        let manager = CallManager.testing(ui: ui)
        let call = try #require(manager.handlePush(push).call)
        #expect(call.remote.avatarURL == URL(string: "https://cdn.example.com/u/alice.png?s=128"))
        #expect(call.remote.displayName == "Alice")
        // The system call UI gets the same party; CallKit shows the name, the app the picture.
        #expect(ui.incomingReports.first?.caller.avatarURL == call.remote.avatarURL)
    }

    @Test("FCM data carries the invite as JSON text; its avatarUrl is read the same")
    func fcmAvatar() throws {
        let invite = #"{"v":1,"callId":"call_f","from":{"avatarUrl":"https://cdn.example.com/a.png","identity":"alice"},"media":"audio","sentAt":"2030-01-01T12:00:00Z","expiresAt":"2030-01-01T12:00:45Z"}"#
        let call = try #require(CallManager.testing(ui: ui).handlePush(["ringrelay": invite]).call)
        #expect(call.remote.avatarURL == URL(string: "https://cdn.example.com/a.png"))
    }

    @Test(
        "An avatarUrl a push should not carry is dropped, and the call still rings",
        arguments: [
            "http://cdn.example.com/a.png", "file:///etc/passwd", "javascript:alert(1)", "https://", "https:///a.png",
            "https://user:secret@cdn.example.com/a.png", "https://user@cdn.example.com/a.png", "https://cdn.example.com/a b.png",
            "https://cdn.example.com/a.png\n", "https://cdn.example.com/\u{202E}gnp.a", "https://cdn.example.com/\u{200B}a.png", "",
            "cdn.example.com/a.png", "https://cdn.example.com:70000/a.png", "https://cdn.example.com/" + String(repeating: "a", count: 1010),
        ])
    func untrustedAvatarIsDropped(_ text: String) throws {
        let call = try #require(CallManager.testing(ui: ui).handlePush(Make.invite("call_a", avatarUrl: text)).call)
        #expect(call.state == .ringing)
        #expect(call.remote.avatarURL == nil)
        #expect(call.remote.identity == "alice")
    }

    @Test("An avatarUrl that is not a string is ignored, never a reason to drop the call")
    func avatarOfWrongType() throws {
        for value: Any in [42, ["https://cdn.example.com/a.png"], ["url": "https://cdn.example.com/a.png"], true] {
            let call = try #require(CallManager.testing(ui: ui).handlePush(Make.invite("call_a", avatarUrl: value)).call, "\(value)")
            #expect(call.remote.avatarURL == nil)
            #expect(call.remote.displayName == "Alice")
        }
    }

    @Test("call.incoming carries the avatar in its call object; a bad one is dropped there too")
    func liveEventAvatar() {
        let manager = CallManager.testing(ui: ui)
        manager.handle(Make.event(.incoming, "evt_1", callId: "call_a", avatarUrl: "https://cdn.example.com/alice.jpg"))
        manager.handle(Make.event(.incoming, "evt_2", callId: "call_b", avatarUrl: "http://cdn.example.com/alice.jpg"))
        #expect(manager.calls.map(\.remote.avatarURL) == [URL(string: "https://cdn.example.com/alice.jpg"), nil])
    }

    @Test("The rule is the server's: at most 1024 bytes, https with a host, nothing hidden")
    func rules() {
        #expect(AvatarURLRules.problem(with: "https://cdn.example.com/a.png") == nil)
        #expect(AvatarURLRules.problem(with: "HTTPS://cdn.example.com:8443/a.png#x") == nil)
        #expect(AvatarURLRules.problem(with: "https://[2001:db8::1]/a.png") == nil)
        let longest = "https://cdn.example.com/" + String(repeating: "a", count: AvatarURLRules.maxBytes - 24)
        #expect(longest.utf8.count == 1024)
        #expect(AvatarURLRules.problem(with: longest) == nil)
        #expect(AvatarURLRules.problem(with: longest + "a")?.contains("1024") == true)
        #expect(AvatarURLRules.problem(with: "http://cdn.example.com/a.png")?.contains("https") == true)
        #expect(AvatarURLRules.problem(with: "https://u:p@cdn.example.com/a.png")?.contains("user info") == true)
        #expect(AvatarURLRules.problem(with: "https://cdn.example.com/a\tb") != nil)
        #expect(AvatarURLRules.url(nil) == nil)
    }
}
