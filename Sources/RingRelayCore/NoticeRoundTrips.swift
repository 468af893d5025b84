import Synchronization

/// Measures how far behind a bus runs, from the notices an instance publishes and hears back on
/// its own listener (``ClusterBus/lag``).
///
/// Notices are numbered as they are sent; the lag is the age of the oldest one not heard back.
/// Numbers are handed out in time order, so the oldest outstanding notice is the lowest number
/// outstanding, found by stepping past the numbers already heard (each number is stepped past
/// once). Only notices sent while the listener listens count: one sent while it was away is
/// never heard, and ``listening(_:)`` forgets them.
package final class NoticeRoundTrips: Sendable {
    private struct State {
        var listening = false
        var next: UInt64 = 0
        /// Send times of the notices not heard back yet, by number.
        var outstanding: [UInt64: ContinuousClock.Instant] = [:]
        /// No outstanding number is lower.
        var oldest: UInt64 = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// Numbers a notice about to be sent; `nil` while nobody listens (it would never be heard).
    package func sending() -> UInt64? {
        state.withLock { state in
            guard state.listening else { return nil }
            defer { state.next += 1 }
            state.outstanding[state.next] = .now
            return state.next
        }
    }

    /// The notice numbered `number` came back, or will not (its sending failed).
    package func settled(_ number: UInt64) {
        state.withLock { state in
            guard state.outstanding.removeValue(forKey: number) != nil else { return }
            while state.oldest < state.next, state.outstanding[state.oldest] == nil { state.oldest += 1 }
        }
    }

    /// The listener started (`true`) or stopped listening: notices outstanding are forgotten
    /// either way, as those sent before a listener took effect are not heard.
    package func listening(_ listening: Bool) {
        state.withLock { state in
            state.listening = listening
            state.outstanding.removeAll()
            state.oldest = state.next
        }
    }

    /// The age of the oldest notice outstanding; zero when none is.
    package var lag: Duration {
        guard let sent = state.withLock({ $0.outstanding[$0.oldest] }) else { return .zero }
        return .now - sent
    }
}
