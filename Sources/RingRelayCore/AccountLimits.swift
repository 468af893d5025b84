/// An operator's settings for one account, in place of the server's (`--rate-limit`,
/// `--rate-limit-burst`, `--ring-timeout`): so one big tenant can be given more without giving
/// it to everyone. `nil` is the server's setting.
public struct AccountLimits: Sendable, Hashable, Codable {
    /// Requests per second of each of the account's budgets (webhooks, calls, binding writes; a
    /// tenth per device identity); 0 is no limit.
    public var rateLimit: Double?
    /// The largest burst of each.
    public var rateLimitBurst: Double?
    /// How long a provider call rings, in seconds (5–180).
    public var ringTimeoutSeconds: Int?

    public init(rateLimit: Double? = nil, rateLimitBurst: Double? = nil, ringTimeoutSeconds: Int? = nil) {
        self.rateLimit = rateLimit
        self.rateLimitBurst = rateLimitBurst
        self.ringTimeoutSeconds = ringTimeoutSeconds
    }

    /// A calling device's identity's share of each budget: a tenth, so one device cannot spend
    /// its account's (`nil`: the server's own tenth).
    public var identityRate: Double? { rateLimit.map { $0 / 10 } }
    public var identityBurst: Double? { rateLimitBurst.map { max(1, $0 / 10) } }

    /// The server's settings throughout.
    public static let serverDefaults = AccountLimits()

    /// Checks the values an operator may set.
    public func validated() throws(RingRelayError) -> AccountLimits {
        if let rateLimit, !(rateLimit >= 0 && rateLimit <= 1_000_000) {
            throw .invalidField("rateLimit", "must be a number from 0 (no limit) to 1000000.")
        }
        if let rateLimitBurst, !(rateLimitBurst >= 1 && rateLimitBurst <= 10_000_000) {
            throw .invalidField("rateLimitBurst", "must be a number from 1 to 10000000.")
        }
        if let ringTimeoutSeconds, !(5...180).contains(ringTimeoutSeconds) {
            throw .invalidField("ringTimeoutSeconds", "must be between 5 and 180.")
        }
        return self
    }
}
