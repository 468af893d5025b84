import Foundation

/// The source of "now" for expiry decisions; injected so tests can move time.
public protocol WallClock: Sendable {
    /// The current time.
    var now: Date { get }
}

/// The system's clock.
public struct SystemWallClock: WallClock {
    /// Creates the clock.
    public init() {}
    /// The current time.
    public var now: Date { Date() }
}
