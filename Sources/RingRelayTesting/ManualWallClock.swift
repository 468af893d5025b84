import Foundation
import RingRelayCore
import Synchronization

/// A wall clock that only moves when a test moves it (or, made `running`, also with real time).
public final class ManualWallClock: WallClock {
    private let current: Mutex<Date>
    /// When the clock started running with real time, if it does.
    private let runningSince: ContinuousClock.Instant?

    /// Creates the clock at `start`.
    ///
    /// - Parameter running: whether it also moves with real time from `start` (for tests whose
    ///   other processes read the real time: a phone ignores a ring that is over by its own clock,
    ///   and a test starved for long on a loaded machine would otherwise hand it rings whose end
    ///   has passed).
    public init(start: Date = Date(timeIntervalSince1970: 1_790_000_000), running: Bool = false) {
        self.current = Mutex(start)
        self.runningSince = running ? .now : nil
    }

    /// The clock's time.
    public var now: Date {
        let base = current.withLock { $0 }
        guard let runningSince else { return base }
        return base.addingTimeInterval((ContinuousClock.now - runningSince).timeInterval)
    }

    /// Moves the clock forward.
    public func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }
}
