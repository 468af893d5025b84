import Foundation
import Logging
import RingRelayWire
import Synchronization

/// The server's log handler: one line per event, as text or as JSON (`--log-format`).
///
/// Text lines are what swift-log's `StreamLogHandler` writes, character for character:
///
///     2026-05-01T08:00:00+0000 info ringrelay: account.id=acc_1 call.id=call_1 [RingRelayServer] ringing
///
/// JSON lines always have the same six keys in this order; `metadata` is always an object, its
/// keys sorted, every value a string (or an array or object of them):
///
/// ```json
/// {"time":"2026-05-01T08:00:00.250Z","level":"info","label":"ringrelay","message":"ringing","metadata":{"account.id":"acc_1"},"source":"RingRelayServer"}
/// ```
///
/// Metadata merges as in `StreamLogHandler`: the logger's, then the metadata provider's, then the
/// line's own. It is kept as a dictionary and rendered only when a line is written: requests and
/// rings set ids on their loggers several times each, and `StreamLogHandler` rendered them on every
/// change (a few percent of a ring's CPU). Its timestamps came from `localtime` and `strftime`,
/// which make glibc `stat` `/etc/localtime` for every line; here the text timestamp is made once a
/// second (``LogTimestamp``).
public struct LineLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let format: LogFormat
    /// Takes one finished line, newline included.
    private let write: @Sendable (String) -> Void

    /// A handler writing to standard error, one `write` per line.
    public static func standardError(label: String, format: LogFormat) -> LineLogHandler {
        LineLogHandler(label: label, format: format, write: StandardError.writeLine)
    }

    init(label: String, format: LogFormat, metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.format = format
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty { merged.merge(provided) { $1 } }
        if let explicit = event.metadata, !explicit.isEmpty { merged.merge(explicit) { $1 } }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        switch format {
        case .text: write(textLine(event, merged))
        case .json: write(jsonLine(event, merged))
        }
    }

    private func textLine(_ event: LogEvent, _ metadata: Logger.Metadata) -> String {
        var line = LogTimestamp.now()
        line.reserveCapacity(160)
        line += " \(event.level)"
        if !label.isEmpty { line += " " + label }
        line += ":"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        line += " [\(event.source)] \(event.message)\n"
        return line
    }

    private func jsonLine(_ event: LogEvent, _ metadata: Logger.Metadata) -> String {
        var line = JSONText(capacity: 256)
        line.object { members in
            members.member("time") { $0.date(Date(), milliseconds: true) }
            members.member("level") { $0.string(event.level.rawValue) }
            members.member("label") { $0.string(label) }
            members.member("message") { $0.string(event.message.description) }
            members.member("metadata") { $0.value(Self.json(.dictionary(metadata))) }
            members.member("source") { $0.string(event.source) }
        }
        line.raw("\n")
        return line.text
    }

    /// A metadata value as JSON: text stays text, lists and dictionaries keep their shape.
    private static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text): .string(text)
        case .stringConvertible(let convertible): .string(convertible.description)
        case .array(let values): .array(values.map(json))
        case .dictionary(let members): .object(members.mapValues(json))
        }
    }
}

/// The local time to the second as `StreamLogHandler` prints it (`%Y-%m-%dT%H:%M:%S%z`), made
/// once per second and shared by every line in it.
enum LogTimestamp {
    private static let cache = Mutex<(second: time_t, text: String)>((-1, ""))

    /// The timestamp for now.
    static func now() -> String {
        let second = time(nil)
        return cache.withLock { cache in
            if cache.second != second { cache = (second, format(second)) }
            return cache.text
        }
    }

    /// `second` as local time. `localtime_r`, unlike `localtime`, reads the time zone once per
    /// process, not once per call.
    static func format(_ second: time_t) -> String {
        var seconds = second
        var local = tm()
        guard localtime_r(&seconds, &local) != nil else { return "<unknown>" }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Lines to standard error, each with one `write(2)` as unbuffered `stderr` does, so lines from
/// several threads never interleave within a line.
enum StandardError {
    static func writeLine(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return  // nowhere to report a failing standard error
                }
            }
        }
    }
}
