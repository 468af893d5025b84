import Logging

/// swift-log's `StreamLogHandler` with its metadata kept as a plain dictionary.
///
/// `StreamLogHandler` renders its metadata to text on every change. Requests and rings set the
/// account and call ids on their loggers several times each and log rarely (at the `warning`
/// level, not at all), so that rendering was a few percent of the server's CPU on a ring. Here a
/// change is a dictionary write; the metadata goes to the stream handler with each line written,
/// which renders it then, in the same format.
public struct PlainMetadataLogHandler: LogHandler {
    private var stream: StreamLogHandler
    public var metadata: Logger.Metadata = [:]

    /// A handler writing to standard error, as `StreamLogHandler.standardError` does.
    public static func standardError(label: String) -> PlainMetadataLogHandler {
        PlainMetadataLogHandler(stream: .standardError(label: label))
    }

    init(stream: StreamLogHandler) {
        self.stream = stream
    }

    public var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var event = event
        // The line's own metadata wins over the logger's, as in StreamLogHandler.
        if !metadata.isEmpty { event.metadata = metadata.merging(event.metadata ?? [:]) { $1 } }
        stream.log(event: event)
    }
}
