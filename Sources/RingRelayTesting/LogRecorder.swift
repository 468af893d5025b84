import Logging
import Synchronization

/// Keeps the log lines at or above a level in memory, so a failing test can say what the code
/// under test logged without a verbose run.
///
/// ```swift
/// let recorder = LogRecorder(level: .warning)
/// let client = try APNsClient(configuration: configuration, logger: recorder.logger("apns"), …)
/// #expect(failed.isEmpty, "\(recorder.lines.prefix(3))")
/// ```
public final class LogRecorder: Sendable {
    private let level: Logger.Level
    private let recorded = Mutex<[String]>([])

    /// A recorder of lines at `level` and above.
    public init(level: Logger.Level = .warning) {
        self.level = level
    }

    /// What was logged so far: level, message and metadata, one line each.
    public var lines: [String] { recorded.withLock { $0 } }

    /// A logger writing into this recorder.
    public func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { _ in Handler(recorder: self, logLevel: self.level) }
        logger.logLevel = level
        return logger
    }

    fileprivate func record(_ line: String) {
        recorded.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var logLevel: Logger.Level
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let all = metadata.merging(event.metadata ?? [:]) { $1 }
            let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            recorder.record("\(event.level) \(event.message)\(fields.isEmpty ? "" : " " + fields)")
        }
    }
}
