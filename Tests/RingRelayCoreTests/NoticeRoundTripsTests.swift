import RingRelayCore
import Testing

/// The bus's lag is the age of the oldest notice not heard back, whatever order notices come
/// back in; nothing counts while nobody listens, and a listener that starts again forgets what
/// it could not have heard.
@Suite struct NoticeRoundTripsTests {
    @Test func theLagIsTheAgeOfTheOldestNoticeNotHeardBack() async throws {
        let trips = NoticeRoundTrips()
        #expect(trips.sending() == nil, "nobody listens: a notice would never come back")
        #expect(trips.lag == .zero)
        trips.listening(true)
        let first = try #require(trips.sending())
        try await Task.sleep(for: .milliseconds(50))
        let second = try #require(trips.sending())
        let third = try #require(trips.sending())
        #expect(trips.lag >= .milliseconds(50))
        // Heard out of order: the second one back does not end the first one's wait.
        trips.settled(second)
        #expect(trips.lag >= .milliseconds(50))
        trips.settled(first)
        #expect(trips.lag < .milliseconds(50), "the third, sent just now, is the oldest left")
        trips.settled(third)
        #expect(trips.lag == .zero)
        trips.settled(third)
        #expect(trips.lag == .zero, "settling twice changes nothing")

        _ = try #require(trips.sending())
        try await Task.sleep(for: .milliseconds(20))
        trips.listening(false)
        #expect(trips.lag == .zero, "the listener stopped: what it did not hear is forgotten")
        trips.listening(true)
        let after = try #require(trips.sending())
        trips.settled(after)
        #expect(trips.lag == .zero)
    }
}
