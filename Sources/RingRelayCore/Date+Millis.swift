import Foundation

extension Date {
    /// Milliseconds since the Unix epoch, as every store keeps times: both engines answer the
    /// same dates, to the millisecond.
    package var millis: Int { Int((timeIntervalSince1970 * 1000).rounded(.down)) }

    /// The date `millis` milliseconds after the Unix epoch.
    package init(millis: Int) { self.init(timeIntervalSince1970: TimeInterval(millis) / 1000) }
}
