import Foundation

extension Duration {
    /// The duration in whole nanoseconds (for swift-metrics timers and NIO time amounts).
    public var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }

    /// The duration in seconds, for `Date` arithmetic.
    public var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
