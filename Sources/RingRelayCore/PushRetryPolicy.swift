import Foundation

/// When a push is tried again: the one retry loop of the APNs and FCM clients.
///
/// An attempt whose disposition is ``PushDisposition/retry`` is tried again after full-jitter
/// exponential back-off (plus any `Retry-After` the service asked for), while attempts remain and
/// the next one would still start before the deadline (the ring's end: a push after it would ring
/// a phone for a call that is over). Anything else is final at once.
///
/// An attempt that ended because its connection was lost before the answer does not use up one of
/// ``maxAttempts``: the push was fine, its connection was not, so only the deadline (and the
/// growing back-off) bounds those resends.
public struct PushRetryPolicy: Sendable {
    /// Attempts at most, the first included.
    public var maxAttempts: Int
    /// Back-off ceiling of the first retry; it doubles with each one.
    public var baseDelay: Duration

    /// Creates a policy.
    public init(maxAttempts: Int, baseDelay: Duration) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
    }

    /// One attempt's answer.
    public struct Attempt: Sendable {
        /// The outcome if this attempt is the last (its `attempts` is set by the loop).
        public var outcome: PushOutcome
        /// How long the service asked to wait before the next attempt.
        public var retryAfter: Duration?
        /// Whether the connection was lost before an answer (the attempt is not counted).
        public var connectionLost: Bool

        /// Creates an attempt's answer.
        public init(outcome: PushOutcome, retryAfter: Duration? = nil, connectionLost: Bool = false) {
            self.outcome = outcome
            self.retryAfter = retryAfter
            self.connectionLost = connectionLost
        }
    }

    /// Runs `attempt` (given its number, from 1) until its answer is final.
    ///
    /// - Parameters:
    ///   - deadline: no attempt starts after this.
    ///   - clock: the time the deadline is compared with.
    ///   - sleep: how the back-off waits (tests record it instead).
    public func run(
        deadline: Date, clock: any WallClock, sleep: @Sendable (Duration) async throws -> Void,
        attempt: (Int) async -> Attempt
    ) async -> PushOutcome {
        var number = 0
        var counted = 0
        while true {
            number += 1
            let answer = await attempt(number)
            if !answer.connectionLost { counted += 1 }
            var outcome = answer.outcome
            outcome.attempts = number
            guard outcome.disposition == .retry, counted < maxAttempts else { return outcome }
            // The jitter is drawn only for a retry: a draw is a system call, and most pushes
            // are answered at the first attempt.
            let wait = (answer.retryAfter ?? .zero) + backoff(attempt: number)
            guard clock.now.addingTimeInterval(wait.timeInterval) < deadline else { return outcome }
            try? await sleep(wait)
        }
    }

    /// Full-jitter exponential back-off: uniformly 0…base·2^(attempt-1).
    public func backoff(attempt: Int) -> Duration {
        let ceiling = baseDelay * (1 << min(attempt - 1, 10))
        return .nanoseconds(Int64.random(in: 0...max(1, ceiling.nanoseconds)))
    }
}
