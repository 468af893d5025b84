import Foundation
import Synchronization

/// Per-key token buckets: `rate` requests per second on average, bursts up to `burst`.
///
/// Used to rate-limit each account's webhooks and calls. Time comes from a `WallClock`, so tests
/// drive it without sleeping.
public final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    /// Sustained requests per second per key.
    public let rate: Double
    /// Largest burst per key.
    public let burst: Double
    private let clock: any WallClock
    private let buckets = Mutex<[String: Bucket]>([:])
    /// Buckets kept before the full ones are dropped. A bucket that has refilled is the same as
    /// none, so dropping it changes no answer; only keys active within the last `burst / rate`
    /// seconds survive a prune.
    public let capacity: Int

    /// Creates a limiter; a `rate` of 0 disables limiting.
    public init(rate: Double, burst: Double, clock: any WallClock, capacity: Int = 50_000) {
        self.rate = rate
        self.burst = max(1, burst)
        self.clock = clock
        self.capacity = capacity
    }

    /// Buckets held now.
    public var count: Int { buckets.withLock { $0.count } }

    /// Takes one token for `key`. Returns `nil` when allowed, or how long to wait before retrying.
    ///
    /// - Parameters:
    ///   - rate: this key's rate, in place of the limiter's (an account's own, set by an operator).
    ///   - burst: this key's burst, likewise.
    public func acquire(_ key: String, rate: Double? = nil, burst: Double? = nil) -> Duration? {
        let rate = rate ?? self.rate
        let burst = max(1, burst ?? self.burst)
        guard rate > 0 else { return nil }
        let now = clock.now
        return buckets.withLock { buckets in
            if buckets.count >= capacity, buckets[key] == nil {
                buckets = buckets.filter { Self.tokens(in: $0.value, at: now, rate: rate, burst: .infinity) < burst }
                // Still full of active keys: start over rather than grow (each gets its burst again).
                if buckets.count >= capacity { buckets.removeAll(keepingCapacity: true) }
            }
            var bucket = Bucket(tokens: buckets[key].map { Self.tokens(in: $0, at: now, rate: rate, burst: burst) } ?? burst, updated: now)
            defer { buckets[key] = bucket }
            guard bucket.tokens < 1 else {
                bucket.tokens -= 1
                return nil
            }
            return Self.wait(for: bucket.tokens, rate: rate)
        }
    }

    /// Throws `429 rate_limited` with `Retry-After` when `key` has no token left, without taking
    /// one: for a request that will take several once it is read (a batch), refused before its
    /// body is read and parsed.
    public func requireToken(_ key: String, tooMany what: String, rate: Double? = nil, burst: Double? = nil) throws(RingRelayError) {
        let rate = rate ?? self.rate
        guard rate > 0 else { return }
        let burst = max(1, burst ?? self.burst)
        let now = clock.now
        let tokens = buckets.withLock { buckets in buckets[key].map { Self.tokens(in: $0, at: now, rate: rate, burst: burst) } ?? burst }
        guard tokens < 1 else { return }
        throw Self.refusal(what, wait: Self.wait(for: tokens, rate: rate))
    }

    /// Takes one token for `key`, or throws `429 rate_limited` with `Retry-After`.
    ///
    /// - Parameter what: what there were too many of, for the message ("calls for this account").
    public func take(_ key: String, tooMany what: String, rate: Double? = nil, burst: Double? = nil) throws(RingRelayError) {
        guard let wait = acquire(key, rate: rate, burst: burst) else { return }
        throw Self.refusal(what, wait: wait)
    }

    /// The tokens `bucket` holds at `now`, refilled at `rate` up to `burst`.
    private static func tokens(in bucket: Bucket, at now: Date, rate: Double, burst: Double) -> Double {
        min(burst, bucket.tokens + max(0, now.timeIntervalSince(bucket.updated)) * rate)
    }

    /// How long until a bucket holding `tokens` holds one.
    private static func wait(for tokens: Double, rate: Double) -> Duration {
        .milliseconds(Int64(((1 - tokens) / rate * 1000).rounded(.up)))
    }

    /// The `429 rate_limited` for too many `what`.
    private static func refusal(_ what: String, wait: Duration) -> RingRelayError {
        RingRelayError(.rateLimited, code: .rateLimited, "Too many \(what); retry after \(Int(wait.timeInterval.rounded(.up))) s.", retryAfter: wait)
    }
}
