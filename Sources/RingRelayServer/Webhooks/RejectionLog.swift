import Logging
import Synchronization

/// Logs rejected unauthenticated requests at most once per cause per interval.
///
/// Anyone can post to a webhook URL, so a line per rejection let a stranger fill the disk (20,000
/// unsigned posts wrote 323 MB of warnings). Every rejection is still counted in `/metrics`
/// (`ringrelay_webhooks_total` by status); the log gets the first of each cause in an interval, and
/// with it how many the interval before left out.
final class RejectionLog: Sendable {
    private struct Cause {
        var lastLogged: ContinuousClock.Instant
        var notLogged: Int
    }

    private let interval: Duration
    private let causes = Mutex<[String: Cause]>([:])

    init(interval: Duration = .seconds(60)) {
        self.interval = interval
    }

    /// Logs `message` as a warning unless this cause was logged within the interval.
    ///
    /// - Parameter message: a fixed text (the cause); what varies goes in `metadata`, which must
    ///   hold nothing longer than an identifier.
    func warning(_ message: String, metadata: @autoclosure () -> Logger.Metadata, logger: Logger) {
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
        if notLogged > 0 { metadata["rejections.not_logged"] = .stringConvertible(notLogged) }
        logger.warning("\(message)", metadata: metadata)
    }
}
