import Foundation
import Logging
@testable import RingRelayServer
import Synchronization
import Testing

/// The server's log handlers: text as swift-log's StreamLogHandler writes it, and JSON lines.
@Suite struct LogHandlerTests {
    private final class Lines: TextOutputStream, Sendable {
        private let text = Mutex("")
        func write(_ string: String) { text.withLock { $0 += string } }
        /// Everything written.
        var all: String { text.withLock { $0 } }
        /// The lines without their timestamps (the text up to the first space).
        var withoutTimestamps: [String] {
            text.withLock { $0 }.split(separator: "\n").map { String($0.drop { $0 != " " }) }
        }
    }

    @Test func linesMatchStreamLogHandlersWithTheLoggersAndTheLinesMetadata() {
        let (plain, stream) = (Lines(), Lines())
        var loggers = [
            Logger(label: "ringrelay") { label in LineLogHandler(label: label, format: .text) { plain.write($0) } },
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
        // The timestamps too: local time to the second, with the zone's offset, as strftime makes it.
        let timestamps = [plain.all, stream.all].map { $0.split(separator: "\n").map { String($0.prefix { $0 != " " }) } }
        for timestamp in timestamps.joined() {
            #expect(timestamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}$"#, options: .regularExpression) != nil, "\(timestamp)")
        }
        #expect(LogTimestamp.format(0) == Self.streamTimestamp(at: 0))
        #expect(LogTimestamp.format(1_800_000_000) == Self.streamTimestamp(at: 1_800_000_000))
    }

    /// What StreamLogHandler's own formatting (`localtime`, `strftime`) makes of `second`.
    private static func streamTimestamp(at second: time_t) -> String {
        var seconds = second
        var buffer = [CChar](repeating: 0, count: 255)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", localtime(&seconds))
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Errors logged with a line become metadata, as StreamLogHandler writes them.
    @Test func errorsAndProviderMetadataMatchStreamLogHandlers() {
        struct Refusal: Error {}
        let (plain, stream) = (Lines(), Lines())
        let provider = Logger.MetadataProvider { ["request.id": "req-1"] }
        var loggers = [
            Logger(label: "") { label in LineLogHandler(label: label, format: .text, metadataProvider: provider) { plain.write($0) } },
            Logger(label: "") { StreamLogHandler(label: $0, stream: stream, metadataProvider: provider) },
        ]
        for index in loggers.indices {
            loggers[index][metadataKey: "request.id"] = "overridden by the provider"
            loggers[index].error("failed", error: Refusal())
        }
        #expect(plain.withoutTimestamps.count == 1)
        #expect(plain.withoutTimestamps == stream.withoutTimestamps)
        #expect(plain.withoutTimestamps.first?.contains("request.id=req-1") == true)
    }

    /// `--log-format json`: one object a line, always the same six keys in the same order, the
    /// metadata merged as StreamLogHandler merges it (logger, then provider, then line).
    @Test func jsonLinesHaveStableKeysAndMergedMetadata() throws {
        let lines = Lines()
        let provider = Logger.MetadataProvider { ["request.id": "req-1", "call.id": "from-provider"] }
        var logger = Logger(label: "ringrelay") { label in
            LineLogHandler(label: label, format: .json, metadataProvider: provider) { line in lines.write(line) }
        }
        logger.logLevel = .info
        logger[metadataKey: "call.id"] = "from-logger"
        logger[metadataKey: "account.id"] = "acc_1"
        logger.info("a \"quoted\"\nmessage", metadata: ["ring.fanout": .stringConvertible(2), "push.ids": ["a", "b"], "nested": ["k": "v"]])
        logger.debug("below the level")
        logger.warning("no line metadata")

        let text = lines.all
        #expect(text.hasSuffix("\n"))
        let rows = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(rows.count == 2)
        let first = String(try #require(rows.first))
        #expect(first.range(of: #"^\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z","level":"info","label":"ringrelay","message":"#, options: .regularExpression) != nil, "\(first)")
        #expect(first.contains(#""message":"a \"quoted\"\nmessage","metadata":{"account.id":"acc_1","call.id":"from-provider","nested":{"k":"v"},"push.ids":["a","b"],"request.id":"req-1","ring.fanout":"2"},"source":"RingRelayServerTests"}"#), "\(first)")
        let second = try #require(JSONSerialization.jsonObject(with: Data(rows.last!.utf8)) as? [String: Any])
        #expect(second["level"] as? String == "warning")
        #expect((second["metadata"] as? [String: String])?["call.id"] == "from-provider")
    }
}
