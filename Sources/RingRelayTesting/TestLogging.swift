import Foundation
import Logging

/// Loggers for tests and the servers they start: silent unless `RINGRELAY_TEST_VERBOSE=1`, so a
/// test run prints its results rather than hundreds of server log lines. With the variable set,
/// every logger writes to standard error at the level its test chose, and ``ServerProcess``-style
/// helpers echo their children's output too (see ``isVerbose``).
public enum TestLogging {
    /// Whether `RINGRELAY_TEST_VERBOSE=1` asks for the logs.
    public static let isVerbose = ProcessInfo.processInfo.environment["RINGRELAY_TEST_VERBOSE"] == "1"

    /// A logger that drops everything, or, when verbose, writes at `level` to standard error.
    public static func logger(_ label: String, level: Logger.Level = .info) -> Logger {
        guard isVerbose else { return Logger(label: label, factory: { _ in SwiftLogNoOpLogHandler() }) }
        var logger = Logger(label: label, factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = level
        return logger
    }
}
