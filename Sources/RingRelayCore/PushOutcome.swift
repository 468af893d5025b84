import Foundation

/// What to do about one push's result. Failures are values, so one dead token never stops a ring.
public enum PushDisposition: Sendable, Hashable {
    /// The push service accepted the push.
    case delivered
    /// Transient: try again (same push id) after a back-off, while the ring is still live.
    case retry
    /// The token is dead: mark the binding invalid and stop pushing to it.
    case invalidateBinding
    /// The account's credentials or settings are wrong: report once, until fixed.
    case fixConfiguration
    /// This push failed for a reason retrying will not fix; nothing else to do.
    case drop
}

/// The result of one push attempt (or of the last of several).
public struct PushOutcome: Sendable, Hashable {
    /// What to do next.
    public var disposition: PushDisposition
    /// HTTP status from the push service; `nil` when no answer arrived (timeout, connection error,
    /// or refused before sending).
    public var status: Int?
    /// The service's reason string, verbatim (`Unregistered`, `UNREGISTERED`, …), or our own for
    /// failures before an answer (`Timeout`, `ConnectionError`, `PayloadTooLarge`).
    public var reason: String?
    /// The push id sent (`apns-id`) or returned (FCM message name).
    public var providerID: String?
    /// APNs `timestamp` of a 410: when the token stopped being valid.
    public var invalidSince: Date?
    /// Time from sending to the answer of the last attempt.
    public var latency: Duration
    /// How many attempts were made.
    public var attempts: Int

    /// Creates an outcome.
    public init(
        disposition: PushDisposition, status: Int?, reason: String?, providerID: String?, invalidSince: Date? = nil,
        latency: Duration, attempts: Int = 1
    ) {
        self.disposition = disposition
        self.status = status
        self.reason = reason
        self.providerID = providerID
        self.invalidSince = invalidSince
        self.latency = latency
        self.attempts = attempts
    }
}

/// A push channel, for metrics, faults and logs.
public enum PushChannel: String, Sendable, Hashable, CaseIterable {
    /// Apple Push Notification service.
    case apns
    /// Firebase Cloud Messaging.
    case fcm
    /// The device's live WebSocket connection.
    case websocket
}

extension PushDisposition {
    /// The disposition as a metric label value.
    public var metricName: String {
        switch self {
        case .delivered: "delivered"
        case .retry: "retry_exhausted"
        case .invalidateBinding: "invalidate_binding"
        case .fixConfiguration: "fix_configuration"
        case .drop: "drop"
        }
    }
}
