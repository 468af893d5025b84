import Foundation
import RingRelayCore
import Synchronization

/// A wall clock that only moves when a test moves it.
public final class ManualWallClock: WallClock {
    private let current: Mutex<Date>

    /// Creates the clock at `start`.
    public init(start: Date = Date(timeIntervalSince1970: 1_790_000_000)) {
        self.current = Mutex(start)
    }

    /// The clock's time.
    public var now: Date { current.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }
}
