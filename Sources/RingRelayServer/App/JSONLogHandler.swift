import Foundation
import Logging
import RingRelayWire

/// Writes each log line as one JSON object, for log collectors (`--log-format json`).
///
/// ```json
/// {"time":"2026-05-01T08:00:00.250Z","level":"info","label":"ringrelay","message":"request","metadata":{"http.status":"200","request.id":"…"},"source":"RingRelayServer"}
/// ```
///
/// The keys are always these six, in this order; `metadata` is always an object, its keys sorted,
/// every value a string (or an array or object of them). Metadata merges as in swift-log's
/// `StreamLogHandler`: the logger's, then the metadata provider's, then the line's own. As in
/// ``PlainMetadataLogHandler``, the metadata is kept as a dictionary and rendered only when a line
/// is written.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    /// Takes one finished line, newline included.
    private let write: @Sendable (String) -> Void

    /// A handler writing to standard error, one `write` per line.
    public static func standardError(label: String) -> JSONLogHandler {
        JSONLogHandler(label: label) { line in try? FileHandle.standardError.write(contentsOf: Data(line.utf8)) }
    }

    init(label: String, metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (String) -> Void) {
        self.label = label
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
        var line = JSONText(capacity: 256)
        line.object { members in
            members.member("time") { $0.date(Date(), milliseconds: true) }
            members.member("level") { $0.string(event.level.rawValue) }
            members.member("label") { $0.string(label) }
            members.member("message") { $0.string(event.message.description) }
            members.member("metadata") { $0.value(Self.json(.dictionary(merged))) }
            members.member("source") { $0.string(event.source) }
        }
        line.raw("\n")
        write(line.text)
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
