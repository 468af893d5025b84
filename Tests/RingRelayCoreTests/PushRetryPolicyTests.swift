import Foundation
import RingRelayCore
import Synchronization
import Testing

@Suite struct PushRetryPolicyTests {
    static let policy = PushRetryPolicy(maxAttempts: 3, baseDelay: .milliseconds(1))

    static func answer(_ disposition: PushDisposition, lost: Bool = false) -> PushRetryPolicy.Attempt {
        PushRetryPolicy.Attempt(
            outcome: PushOutcome(disposition: disposition, status: nil, reason: lost ? "ConnectionError" : "ServiceUnavailable", providerID: nil, latency: .zero),
            connectionLost: lost)
    }

    @Test func transientAnswersUseUpTheAttempts() async {
        let outcome = await Self.policy.run(deadline: Date().addingTimeInterval(30), clock: SystemWallClock(), sleep: { _ in }) { _ in
            Self.answer(.retry)
        }
        #expect(outcome.disposition == .retry)
        #expect(outcome.attempts == 3)
    }

    @Test func lostConnectionsAreResentWithoutUsingUpAttempts() async {
        // Four lost connections, then a transient answer twice more: 4 + 3 sends in all.
        let outcome = await Self.policy.run(deadline: Date().addingTimeInterval(30), clock: SystemWallClock(), sleep: { _ in }) { number in
            Self.answer(.retry, lost: number <= 4)
        }
        #expect(outcome.attempts == 7)
        #expect(outcome.reason == "ServiceUnavailable")
    }

    @Test func theDeadlineBoundsLostConnectionsToo() async {
        let sends = Mutex(0)
        let outcome = await Self.policy.run(deadline: Date().addingTimeInterval(-1), clock: SystemWallClock(), sleep: { _ in }) { _ in
            sends.withLock { $0 += 1 }
            return Self.answer(.retry, lost: true)
        }
        #expect(outcome.attempts == 1)
        #expect(sends.withLock { $0 } == 1)
    }

    @Test func finalAnswersAreNotRetried() async {
        let outcome = await Self.policy.run(deadline: Date().addingTimeInterval(30), clock: SystemWallClock(), sleep: { _ in }) { _ in
            Self.answer(.invalidateBinding)
        }
        #expect(outcome.attempts == 1)
    }
}
