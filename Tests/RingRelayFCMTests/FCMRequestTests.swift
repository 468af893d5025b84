import Foundation
import RingRelayFCM
import Testing

@Suite struct FCMRequestTests {
    @Test func timeToLiveIsTheRingTimeLeftRoundedDown() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000)
        let request = try FCMRequest(token: "fcm-token", data: ["k": "v"], expiresAt: now.addingTimeInterval(29.9), now: now)
        #expect(request.ttl == "29s")
        let late = try FCMRequest(token: "fcm-token", data: ["k": "v"], expiresAt: now.addingTimeInterval(-5), now: now)
        #expect(late.ttl == "0s")
    }

    @Test func limitsAreCheckedBeforeSending() {
        #expect(throws: FCMRequestError.reservedKey("from")) {
            try FCMRequest(token: "t", data: ["from": "x"], timeToLive: 30)
        }
        #expect(throws: FCMRequestError.reservedKey("google.foo")) {
            try FCMRequest(token: "t", data: ["google.foo": "x"], timeToLive: 30)
        }
        #expect(throws: FCMRequestError.invalidToken) {
            try FCMRequest(token: "has space", data: [:], timeToLive: 30)
        }
        let big = ["k": String(repeating: "x", count: FCMRequest.maxDataBytes)]
        #expect(throws: FCMRequestError.self) {
            try FCMRequest(token: "t", data: big, timeToLive: 30)
        }
    }
}
