import Foundation

/// When to try the live connection again: exponential back-off with full jitter.
///
/// Attempt `n` (from 1) waits a random time between zero and
/// `min(maximumDelay, initialDelay × multiplier^(n-1))`, so many devices that lost the server
/// at once do not all come back at the same moment.
public struct ReconnectPolicy: Sendable, Hashable {
    /// The ceiling of the first wait.
    public var initialDelay: Duration
    /// The largest ceiling.
    public var maximumDelay: Duration
    /// How much the ceiling grows per failed attempt.
    public var multiplier: Double

    /// Creates a policy.
    public init(initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(30), multiplier: Double = 2) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = multiplier
    }

    /// The ceiling of the wait before attempt `attempt` (1 for the first retry).
    public func ceiling(forAttempt attempt: Int) -> Duration {
        let growth = pow(multiplier, Double(max(0, attempt - 1)))
        let seconds = min(maximumDelay.seconds, initialDelay.seconds * growth)
        return .seconds(seconds)
    }

    /// The wait before attempt `attempt`, with `unitRandom` in `0..<1` picking the point in the range.
    public func delay(forAttempt attempt: Int, unitRandom: Double) -> Duration {
        ceiling(forAttempt: attempt) * min(max(unitRandom, 0), 1)
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
