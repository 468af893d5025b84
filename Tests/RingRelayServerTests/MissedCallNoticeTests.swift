import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// Missed-call notices (issue 17, item 4): when a ring is cancelled or times out, the callee's
/// devices that never took it live get one regular notification each — an APNs alert push to
/// `apns_alert` bindings, an FCM notification message to `fcm` bindings — through the real clients
/// to both simulators over HTTP/2 and TLS.
@Suite struct MissedCallNoticeTests {
    @Test func aCancelledCallNotifiesEachDeviceThatNeverTookItLiveOnce() async throws {
        try await SimulatorWorld.with { world in
            // b1 takes the ring live, so its alert binding stays quiet. b2 (VoIP and alert bindings),
            // b3 (FCM) and b4 (alert and FCM: one device, one notice) were offline.
            _ = try await world.binding("apns_alert", token: apnsToken(seed: 1), device: "b1")
            let b2 = try await world.binding("apns_alert", token: apnsToken(seed: 2), device: "b2")
            _ = try await world.binding("apns_voip", token: apnsToken(seed: 22), device: "b2")
            let b3 = try await world.binding("fcm", token: FCMTestPushTests.fcmToken(3), device: "b3")
            _ = try await world.binding("apns_alert", token: apnsToken(seed: 4), device: "b4")
            _ = try await world.binding("fcm", token: FCMTestPushTests.fcmToken(4), device: "b4")
            let b1 = try await LiveDevice.connect(
                port: world.port, token: try await world.client.accessToken(identity: "bob", deviceID: "b1", key: world.key))

            let call = try await world.call(#"{"from":"alice","to":"bob","displayName":"Alice","notifyMissed":true}"#)
            #expect(call.notifyMissed == true)
            #expect(try await b1.nextEvent().type == .incoming)
            let deadline = ContinuousClock.now + .seconds(30)
            while (try await world.client.send(.get, "/v1/calls/\(call.id)", token: world.key).decode(CallResource.self).deliveries ?? [])
                .contains(where: { $0.channel == "websocket" && $0.outcome == "pending" }), ContinuousClock.now < deadline
            {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try await world.client.send(.post, "/v1/calls/\(call.id)/cancel", token: world.key).status == .ok)
            #expect(try await b1.nextEvent().type == .cancelled)

            let record = try await world.record(call.id, notices: 3)
            let notices = (record.deliveries ?? []).filter { $0.kind == MissedCallNotices.kind }
            #expect(notices.count == 3)
            #expect(notices.allSatisfy { $0.outcome == "delivered" })
            #expect(Set(notices.compactMap(\.deviceId)) == ["b2", "b3", "b4"])
            #expect(notices.contains { $0.bindingId == b2.id && $0.channel == "apns" })
            #expect(notices.contains { $0.bindingId == b3.id && $0.channel == "fcm" })
            #expect(notices.filter { $0.deviceId == "b4" }.count == 1)

            // The alert push: never VoIP, collapsed per call, kept for a day for a phone that is off.
            let alerts = world.alerts
            let shown = world.notifications
            #expect(alerts.count + shown.count == 3)
            #expect(alerts.contains { $0.deviceToken == apnsToken(seed: 2) })
            for alert in alerts {
                #expect(alert.headers["apns-collapse-id"] == call.id)
                let expiration = try #require(alert.headers["apns-expiration"].flatMap(Double.init))
                #expect(expiration > Date().addingTimeInterval(23 * 3600).timeIntervalSince1970)
                let payload = try #require(try JSONSerialization.jsonObject(with: alert.payload) as? [String: Any])
                let aps = try #require(payload["aps"] as? [String: Any])
                let text = try #require(aps["alert"] as? [String: String])
                #expect(text == ["title": "Missed call", "body": "Missed call from Alice"])
                let ringrelay = try #require(payload["ringrelay"] as? [String: String])
                #expect(ringrelay == ["type": "call.missed", "callId": call.id, "reason": "cancelled"])
            }
            // The FCM notification message, tagged with the call.
            let first = try #require(shown.first { $0.registrationToken == FCMTestPushTests.fcmToken(3) })
            #expect(first.notification == ["title": "Missed call", "body": "Missed call from Alice"])
            let message = try #require(try JSONSerialization.jsonObject(with: first.body) as? [String: [String: Any]])
            let android = try #require(message["message"]?["android"] as? [String: Any])
            #expect(android["collapse_key"] as? String == call.id)
            #expect((android["notification"] as? [String: String])?["tag"] == call.id)

            // A second cancel changes nothing and sends nothing more.
            #expect(try await world.client.send(.post, "/v1/calls/\(call.id)/cancel", token: world.key).status == .conflict)
            try await Task.sleep(for: .milliseconds(300))
            #expect(world.alerts.count + world.notifications.count == 3)
            await b1.close()
        }
    }

    @Test func theAccountDefaultSendsNoticesOnTimeoutAndACallCanOptOut() async throws {
        try await SimulatorWorld.with { world in
            _ = try await world.binding("apns_alert", token: apnsToken(seed: 5), device: "b5")
            _ = try await world.binding("apns_voip", token: apnsToken(seed: 55), device: "b5")
            // Off by default: a missed call sends nothing.
            let quiet = try await world.call(#"{"from":"alice","to":"bob","ringTimeoutSeconds":5}"#)
            #expect(quiet.notifyMissed == nil)
            let settings = try await world.client.send(.patch, "/v1/settings/calls", token: world.key, json: #"{"notifyMissed":true}"#)
            #expect(try settings.decode(CallSettings.self) == CallSettings(ifBusy: "ring", notifyMissed: true))
            // The default is read when the call ends, so `quiet` (created before) follows it too;
            // this one opts out.
            let optedOut = try await world.call(#"{"from":"alice","to":"bob","ringTimeoutSeconds":5,"notifyMissed":false}"#)
            let noticed = try await world.call(#"{"from":"alice","to":"bob","ringTimeoutSeconds":5}"#)

            world.server.clock.advance(by: 6)
            for call in [quiet, optedOut, noticed] {
                #expect(try await world.record(call.id, notices: call.id == optedOut.id ? 0 : 1).state == "missed")
            }
            let collapseIDs = world.alerts.compactMap { $0.headers["apns-collapse-id"] }
            #expect(collapseIDs.sorted() == [quiet.id, noticed.id].sorted())
            #expect(!collapseIDs.contains(optedOut.id))
            let payload = try #require(world.alerts.first.map(\.payload))
            #expect(String(decoding: payload, as: UTF8.self).contains(#""reason":"unanswered""#))
        }
    }

    @Test func aSealedCallsNoticeSaysNothingAboutTheCaller() async throws {
        try await SimulatorWorld.with { world in
            let alert = try await world.binding(
                "apns_alert", token: apnsToken(seed: 6), device: "b6", publicKey: IdentityKeysTests.publicKey())
            let call = try await world.call(
                #"{"from":"alice","to":"bob","notifyMissed":true,"sealed":[{"bindingId":"\#(alert.id)","box":"AAAA"}]}"#)
            #expect(call.sealed == true)
            #expect(try await world.client.send(.post, "/v1/calls/\(call.id)/cancel", token: world.key).status == .ok)
            _ = try await world.record(call.id, notices: 1)
            let notice = try #require(world.alerts.first { $0.headers["apns-collapse-id"] == call.id })
            let text = String(decoding: notice.payload, as: UTF8.self)
            #expect(text.contains("Open the app to see who called."))
            #expect(!text.contains("alice"))
        }
    }

    @Test func noticesArePlannedOncePerDeviceThatMissedTheRing() {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        var call = Call(
            id: "call_1", accountID: "acc_1", source: .native, caller: "alice", callee: "bob", state: .missed, externalID: nil, createdAt: now,
            ringDeadline: now, updatedAt: now)
        func binding(_ id: String, _ type: BindingType, device: String?, status: BindingStatus = .active) -> Binding {
            Binding(
                id: id, accountID: "acc_1", identity: "bob", type: type, token: id, environment: nil, environmentIsExplicit: false,
                deviceID: device, publicKey: nil, status: status, invalidReason: nil, invalidatedAt: nil, registeredAt: now, createdAt: now,
                updatedAt: now)
        }
        let bindings = [
            binding("voip", .apnsVoIP, device: "d1"), binding("alert1", .apnsAlert, device: "d1"), binding("fcm1", .fcm, device: "d1"),
            binding("alert2", .apnsAlert, device: "d2"), binding("dead", .fcm, device: "d3", status: .invalid),
            binding("anon1", .fcm, device: nil), binding("anon2", .apnsAlert, device: nil), binding("live", .apnsAlert, device: "d4"),
        ]
        let acked = Delivery(
            id: "dlv_1", callID: "call_1", bindingID: nil, deviceID: "d4", channel: .websocket, kind: "event", outcome: "delivered", createdAt: now)
        let unacked = Delivery(
            id: "dlv_2", callID: "call_1", bindingID: nil, deviceID: "d2", channel: .websocket, kind: "event", outcome: "unacknowledged",
            createdAt: now)
        let planned = MissedCallNotices.plan(call: call, deliveries: [acked, unacked], bindings: bindings, now: now)
        #expect(planned.map(\.binding.id) == ["alert1", "alert2", "anon1", "anon2"])
        #expect(planned.allSatisfy { $0.delivery.kind == "missed_call" })
        // Only a ring that ended unanswered is one to notify about (a ring group's identity's ring
        // can end so while the call goes on: the notifier names those identities itself).
        for state in CallState.allCases {
            call.state = state
            #expect(MissedCallNotices.applies(to: call) == (state == .cancelled || state == .missed))
        }
    }
}
