import Foundation
import NIOCore

extension NIODeadline {
    /// The monotonic deadline `interval` seconds from now (now itself for a negative interval):
    /// how a wall-clock deadline such as a ring's end becomes one the pool can wait on.
    public static func after(_ interval: TimeInterval) -> NIODeadline {
        .now() + .nanoseconds(Int64(max(0, interval) * 1e9))
    }
}
