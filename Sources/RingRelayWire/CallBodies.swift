import Foundation

/// One device delivery of a call, as the API shows it.
public struct DeliveryResource: Sendable, Hashable, Codable {
    /// `dlv_…`
    public var id: String
    /// The binding pushed to.
    public var bindingId: String
    /// `apns` or `fcm`.
    public var channel: String
    /// `voip`, `alert` or `data`.
    public var kind: String
    /// `pending`, `delivered`, `invalidate_binding`, `fix_configuration`, `retry_exhausted` or `drop`.
    public var outcome: String
    /// The push service's HTTP status.
    public var status: Int?
    /// The push service's reason, verbatim.
    public var reason: String?
    /// The push id (`apns-id`, FCM message name).
    public var pushId: String?
    /// Attempts made so far.
    public var attempts: Int
    /// Send-to-answer time of the last attempt.
    public var latencyMs: Double?
    /// When it was planned.
    public var createdAt: Date
    /// When the final answer came.
    public var completedAt: Date?

    /// Creates the body.
    public init(
        id: String, bindingId: String, channel: String, kind: String, outcome: String, status: Int?, reason: String?, pushId: String?,
        attempts: Int, latencyMs: Double?, createdAt: Date, completedAt: Date?
    ) {
        self.id = id
        self.bindingId = bindingId
        self.channel = channel
        self.kind = kind
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.pushId = pushId
        self.attempts = attempts
        self.latencyMs = latencyMs
        self.createdAt = createdAt
        self.completedAt = completedAt
    }
}

/// A call as the API shows it.
public struct CallResource: Sendable, Hashable, Codable {
    /// `call_…`
    public var id: String
    /// `twilio`, `webex` or `native`.
    public var source: String
    /// `ringing`, `accepted`, `rejected`, `cancelled`, `ended`, `missed` or `unreachable`.
    public var state: String
    /// The caller as the source named it.
    public var from: String?
    /// The identity rung.
    public var to: String
    /// When the call arrived.
    public var createdAt: Date
    /// When ringing stops.
    public var ringEndsAt: Date
    /// When the state last changed.
    public var updatedAt: Date
    /// One entry per device rung.
    public var deliveries: [DeliveryResource]

    /// Creates the body.
    public init(
        id: String, source: String, state: String, from: String?, to: String, createdAt: Date, ringEndsAt: Date, updatedAt: Date,
        deliveries: [DeliveryResource]
    ) {
        self.id = id
        self.source = source
        self.state = state
        self.from = from
        self.to = to
        self.createdAt = createdAt
        self.ringEndsAt = ringEndsAt
        self.updatedAt = updatedAt
        self.deliveries = deliveries
    }
}

/// Answer to a provider webhook that rang devices.
public struct WebhookRingResponse: Sendable, Hashable, Codable {
    /// The call created (or found again, for a repeated notification).
    public var callId: String
    /// Each device's first answer, or `pending` when it took longer than the server waits.
    public var deliveries: [DeliveryResource]

    /// Creates the body.
    public init(callId: String, deliveries: [DeliveryResource]) {
        self.callId = callId
        self.deliveries = deliveries
    }
}

/// Answer to a provider webhook that needs no ring (another resource or event type).
public struct WebhookIgnoredResponse: Sendable, Hashable, Codable {
    /// Why nothing rang.
    public var ignored: String

    /// Creates the body.
    public init(ignored: String) { self.ignored = ignored }
}
