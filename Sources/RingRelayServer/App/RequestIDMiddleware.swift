import HTTPTypes
import Hummingbird
import Logging

/// Request ids: every response carries one as `X-Request-Id`, and every log line the request
/// causes carries it as `request.id`, so a client's report and the server's logs meet.
enum RequestIDs {
    /// The header, in every response (and from a trusted proxy, in requests).
    static let header = HTTPField.Name("X-Request-Id")!

    /// The id of the request the current task serves.
    @TaskLocal static var current: String?

    /// Puts `request.id` on the lines of tasks serving a request, those the services it calls
    /// write with loggers of their own (ringer, push clients) included.
    static let metadataProvider = Logger.MetadataProvider {
        current.map { ["request.id": .string($0)] } ?? [:]
    }

    /// Whether an incoming id can be ours: 1–128 letters, digits and `-_.:/+=@`, so it can break
    /// neither a log line nor a header.
    static func isWellFormed(_ id: some StringProtocol) -> Bool {
        (1...128).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "+"),
                    UInt8(ascii: "="), UInt8(ascii: "@"):
                    true
                default: false
                }
            }
    }
}

/// Gives each request its id: a well-formed `X-Request-Id` from the proxy with `--trust-proxy`
/// (so the proxy's logs and ours share it), else a new one; a client cannot choose ids otherwise.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext
    /// `--trust-proxy`.
    let trustProxy: Bool
    /// The most of a refused upgrade's answer kept to send (an error body is a few hundred bytes).
    static let maxRefusalBytes = 16 * 1024

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let forwarded = trustProxy ? request.headers[RequestIDs.header].flatMap { RequestIDs.isWellFormed($0) ? $0 : nil } : nil
        let id = forwarded ?? RequestID().description
        var context = context
        // One id a line: ours replaces Hummingbird's own. On the context's logger it also stays on
        // a live connection's lines after the upgrade, where the task-local value no longer reaches.
        context.logger[metadataKey: "hb.request.id"] = nil
        context.logger[metadataKey: "request.id"] = .string(id)
        // A refused upgrade is answered by hummingbird-websocket, not with this response: the
        // stamp puts this response in place of the library's bare 400.
        let upgrade = request.headers[.upgrade] != nil
        if upgrade { RequestIDStamp.remember(id, on: context.channel) }
        var response = try await RequestIDs.$current.withValue(id) { try await next(request, context) }
        response.headers[RequestIDs.header] = id
        if upgrade, response.status != .ok {
            let head = response.head
            let body = try await response.collectedBody(limit: Self.maxRefusalBytes)
            RequestIDStamp.answerRefusedUpgrade(with: head, body: body, on: context.channel)
            return Response(status: head.status, headers: head.headerFields, body: .init(byteBuffer: body))
        }
        return response
    }
}
