import Logging
@testable import RingRelayServer
import Synchronization
import Testing

/// The server's log handler writes what swift-log's StreamLogHandler writes.
@Suite struct LogHandlerTests {
    private final class Lines: TextOutputStream, Sendable {
        private let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
        /// The lines without their timestamps (the text up to the first space).
        var withoutTimestamps: [String] {
            text.withLock { $0 }.split(separator: "\n").map { String($0.drop { $0 != " " }) }
        }
    }

    @Test func linesMatchStreamLogHandlersWithTheLoggersAndTheLinesMetadata() {
        let (plain, stream) = (Lines(), Lines())
        var loggers = [
            Logger(label: "ringrelay") { PlainMetadataLogHandler(stream: StreamLogHandler(label: $0, stream: plain, metadataProvider: nil)) },
            Logger(label: "ringrelay") { StreamLogHandler(label: $0, stream: stream, metadataProvider: nil) },
        ]
        for index in loggers.indices {
            loggers[index].logLevel = .info
            loggers[index].info("no metadata")
            loggers[index][metadataKey: "account.id"] = "acc_1"
            loggers[index][metadataKey: "call.id"] = "call_1"
            loggers[index][metadataKey: "call.id"] = "call_2"
            loggers[index].info("logger metadata")
            loggers[index].warning("both, the line's winning", metadata: ["call.id": "call_3", "ring.fanout": "2"])
            loggers[index].debug("below the level")
            loggers[index][metadataKey: "account.id"] = nil
            loggers[index].error("one key left")
        }
        #expect(plain.withoutTimestamps.count == 4)
        #expect(plain.withoutTimestamps == stream.withoutTimestamps)
        #expect(plain.withoutTimestamps[2].contains("call.id=call_3"))
    }
}
