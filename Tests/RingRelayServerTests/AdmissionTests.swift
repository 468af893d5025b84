import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import RingRelayServer

/// What admission control reads: the calls' own times, and the event loops' lateness. (Refusals
/// by a real instance behind its database: ``ClusterTests``.)
@Suite struct AdmissionTests {
    /// The standing time is the least of the last second's calls, and only when there were
    /// enough of them: one slow call among quick ones is not a line, a second of slow ones is.
    @Test func theStandingCallTimeIsTheQuickestOfARecentFullSecond() async throws {
        let times = CallTimes()
        for _ in 0..<(CallTimes.enough - 1) { times.record(.milliseconds(400)) }
        #expect(times.standing == .zero, "too few calls to say")
        times.record(.milliseconds(300))
        #expect(times.standing == .milliseconds(300))
        times.record(.milliseconds(2))
        #expect(times.standing == .milliseconds(2), "one quick call: no line stands")
        try await Task.sleep(for: CallTimes.window + .milliseconds(100))
        #expect(times.standing == .zero, "calls older than the window no longer count")
    }

    /// A loop kept busy in 300 ms stretches runs its timers late every time: that lateness
    /// stands; once the loop is free again, it falls back.
    @Test func aLoopKeptBusyRunsLateAndRecovers() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let lag = EventLoopLag(group: group)
        let measuring = Task { try await lag.run() }
        defer {
            measuring.cancel()
            group.shutdownGracefully { _ in }
        }
        try await Task.sleep(for: .milliseconds(400))
        #expect(lag.lag < .milliseconds(100), "an idle loop: \(lag.lag)")

        let loop = group.next()
        let busyUntil = ContinuousClock.now + .milliseconds(2500)
        @Sendable func block() {
            guard ContinuousClock.now < busyUntil else { return }
            Thread.sleep(forTimeInterval: 0.3)
            loop.execute(block)
        }
        loop.execute(block)
        var highest: Duration = .zero
        while ContinuousClock.now < busyUntil {
            try await Task.sleep(for: .milliseconds(100))
            highest = max(highest, lag.lag)
        }
        #expect(highest > .milliseconds(150), "a loop busy in 300 ms stretches: \(highest)")
        try await Task.sleep(for: .milliseconds(800))
        #expect(lag.lag < .milliseconds(100), "free again: \(lag.lag)")
    }
}
