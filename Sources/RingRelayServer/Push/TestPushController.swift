import Foundation
import Hummingbird
import Logging
import RingRelayCore
import RingRelayWire

/// `POST /v1/bindings/{id}/test`: one real push to one binding, answered with what the push
/// service said. The first thing to try after uploading credentials.
struct TestPushController {
    let store: any DataStore
    let clock: any WallClock
    /// The same push path rings use.
    let pusher: BindingPusher

    /// How long a test push may keep retrying.
    static let deadline: TimeInterval = 15

    /// Test pushes an account may send: a burst of 10, then one every 2 s. They are for checking a
    /// setup, and each one makes the server reach out (to Apple, Google, or a token endpoint).
    let limiter: RateLimiter
    static let perSecond = 0.5
    static let burst = 10.0

    func register(on router: Router<RingRelayRequestContext>) {
        router.post("/v1/bindings/:bindingId/test") { request, context in try await test(request, context) }
    }

    func test(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<TestPushResult> {
        let scope = try context.requireScope()
        try await request.expectNoBody(maxBytes: 64 * 1024)
        try limiter.take(scope.accountID, tooMany: "test pushes for this account")
        let id = context.parameters.value("bindingId")
        guard let binding = try await store.binding(id: id, accountID: scope.accountID, identity: scope.identity) else {
            throw RingRelayError.notFound("binding", id: id)
        }
        let now = clock.now
        let payload = try Self.payload(for: binding, now: now)
        let result = try await pusher.push(payload, to: binding, deadline: now.addingTimeInterval(Self.deadline))
        let outcome = result.outcome
        return JSONResponse(
            TestPushResult(
                bindingId: binding.id, channel: result.channel.rawValue, kind: result.kind, outcome: outcome.disposition.metricName,
                status: outcome.status, reason: outcome.reason, pushId: outcome.providerID,
                latencyMs: (outcome.latency.timeInterval * 1000 * 1000).rounded() / 1000, attempts: outcome.attempts,
                binding: BindingResource(result.binding)))
    }

    /// A test payload in the shape real pushes take, marked `"test": true` so the SDK shows and
    /// ends it rather than treating it as a call. FCM data carries the same `ringrelay` object as
    /// a JSON string, because FCM data values are strings. A `live` binding has none: it is never
    /// pushed (422 `channel_not_supported`).
    static func payload(for binding: Binding, now: Date) throws -> BindingPusher.Payload {
        let formatter = ISO8601DateFormatter()
        let ringrelay: [String: Any] = [
            "v": 1, "test": true, "callId": "call_test_\(UUID().uuidString.lowercased())",
            "from": ["identity": "ringrelay", "displayName": "RingRelay test"], "media": "audio",
            "sentAt": formatter.string(from: now), "expiresAt": formatter.string(from: now.addingTimeInterval(30)), "metadata": [:] as [String: Any],
        ]
        switch binding.type {
        case .live:
            throw RingRelayError(
                .unprocessable, code: .channelNotSupported, "A live binding is never pushed: its device rings over its live connection.")
        case .fcm:
            let json = try JSONSerialization.data(withJSONObject: ringrelay, options: .sortedKeys)
            return .fcm(["ringrelay": String(decoding: json, as: UTF8.self)])
        case .apnsVoIP, .apnsAlert:
            let aps: [String: Any] =
                binding.type == .apnsAlert
                ? ["alert": ["title": "RingRelay", "body": "Test notification"], "mutable-content": 1] : [:]
            return .apns(Array(try JSONSerialization.data(withJSONObject: ["aps": aps, "ringrelay": ringrelay], options: .sortedKeys)))
        }
    }
}
