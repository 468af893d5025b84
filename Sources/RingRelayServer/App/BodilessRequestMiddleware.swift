import Hummingbird
import NIOCore
import RingRelayCore

/// Refuses a body sent to an operation that takes none: every `GET`, `HEAD` and `DELETE` of the
/// API. `413 body_too_large` (the operation's limit is 0 bytes), before the handler runs.
///
/// Such a body used to be ignored, and a `DELETE` with a megabyte of unknown fields answered 204.
/// It is not read: a `Content-Length` says it is there, and of a chunked body one piece is enough
/// (``RequestReadGuard`` bounds what is drained of the rest). Requests without a body, the rule,
/// cost a method check and two header lookups.
struct BodilessRequestMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext

    static let refusal = RingRelayError(.payloadTooLarge, code: .bodyTooLarge, "This operation takes no request body; send none.")

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.method == .get || request.method == .delete || request.method == .head, context.endpointPath != nil,
            try await Self.hasBody(request)
        {
            throw Self.refusal
        }
        return try await next(request, context)
    }

    private static func hasBody(_ request: Request) async throws -> Bool {
        if let length = request.headers[.contentLength] { return Int(length).map { $0 > 0 } ?? true }
        guard request.headers[.transferEncoding] != nil else { return false }
        do {
            _ = try await request.body.collect(upTo: 0)
            return false
        } catch is NIOTooManyBytesError {
            return true
        }
    }
}
