import Logging
import Synchronization

/// Logs a warning at most once per cause per interval, with how many the interval before left out.
///
/// For what strangers or an outage can repeat thousands of times a second: anyone can post to a
/// webhook URL (20,000 unsigned posts once wrote 323 MB of warnings), and an unreachable push
/// service fails every push. What is left out is still counted where it matters (`/metrics`).
package final class RateLimitedLog: Sendable {
    private struct Cause {
        var lastLogged: ContinuousClock.Instant
        var notLogged: Int
    }

    private let interval: Duration
    /// The metadata key of the count left out.
    private let notLoggedKey: String
    private let causes = Mutex<[String: Cause]>([:])

    package init(interval: Duration = .seconds(60), notLoggedKey: String = "log.not_logged") {
        self.interval = interval
        self.notLoggedKey = notLoggedKey
    }

    /// Logs `message` as a warning unless this cause was logged within the interval.
    ///
    /// - Parameter message: a fixed text (the cause); what varies goes in `metadata`, which must
    ///   hold nothing longer than an identifier.
    package func warning(_ message: String, metadata: @autoclosure () -> Logger.Metadata, logger: Logger) {
        let now = ContinuousClock.now
        let notLogged: Int? = causes.withLock { causes in
            if var cause = causes[message], now - cause.lastLogged < interval {
                cause.notLogged += 1
                causes[message] = cause
                return nil
            }
            defer { causes[message] = Cause(lastLogged: now, notLogged: 0) }
            return causes[message]?.notLogged ?? 0
        }
        guard let notLogged else { return }
        var metadata = metadata()
        if notLogged > 0 { metadata[notLoggedKey] = .stringConvertible(notLogged) }
        logger.warning("\(message)", metadata: metadata)
    }
}
