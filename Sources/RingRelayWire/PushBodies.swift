import Foundation

/// `POST /v1/bindings/{id}/test` answer: what the push service said about one real push.
public struct TestPushResult: Sendable, Hashable, Codable {
    /// The binding pushed to.
    public var bindingId: String
    /// `apns` or `fcm`.
    public var channel: String
    /// Push kind: `voip` or `alert` for APNs.
    public var kind: String
    /// `delivered`, `invalidate_binding`, `fix_configuration`, `retry_exhausted` or `drop`.
    public var outcome: String
    /// HTTP status from the push service; absent when no answer arrived.
    public var status: Int?
    /// The push service's reason, verbatim (`Unregistered`, `BadDeviceToken`, …), or `Timeout`,
    /// `ConnectionError`, `PayloadTooLarge` for failures before an answer.
    public var reason: String?
    /// The push id (`apns-id`), for Apple's delivery log.
    public var pushId: String?
    /// Send-to-answer time of the last attempt, in milliseconds.
    public var latencyMs: Double
    /// Attempts made (transient failures are retried).
    public var attempts: Int
    /// The binding after the outcome was applied (an invalidated binding shows it here).
    public var binding: BindingResource

    /// Creates the body.
    public init(
        bindingId: String, channel: String, kind: String, outcome: String, status: Int?, reason: String?, pushId: String?,
        latencyMs: Double, attempts: Int, binding: BindingResource
    ) {
        self.bindingId = bindingId
        self.channel = channel
        self.kind = kind
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.pushId = pushId
        self.latencyMs = latencyMs
        self.attempts = attempts
        self.binding = binding
    }
}
