import Foundation
import Hummingbird
import Logging

/// With `--access-log`, one line per request: method, route template, status, duration and
/// request id (from ``RequestIDMiddleware``, which runs before it).
///
/// Never the raw path (the template names the endpoint without its ids), the query (it can carry
/// `?access_token=`), headers or bodies.
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext
    private let logger: Logger

    /// - Parameter logger: the server's logger; the lines are written at `info` whatever
    ///   `--log-level` says, since turning the access log on asks for them.
    init(logger: Logger) {
        var logger = logger
        logger.logLevel = .info
        self.logger = logger
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = (ContinuousClock.now - start).components
        let milliseconds = Double(elapsed.seconds) * 1000 + Double(elapsed.attoseconds) / 1e15
        var metadata: Logger.Metadata = [
            "http.method": .string(request.method.rawValue),
            "http.route": .string(context.endpointPath ?? "unmatched"),
            "http.status": .stringConvertible(response.status.code),
            "http.duration_ms": .string(String(format: "%.3f", milliseconds)),
        ]
        metadata["request.id"] = RequestIDs.current.map { .string($0) }
        logger.info("request", metadata: metadata)
        return response
    }
}
