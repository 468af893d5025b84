import Hummingbird
import RingRelayCore
import Synchronization

/// The bytes of request bodies the server holds while it reads them, all requests together.
///
/// A body is collected whole before it is parsed, so each request in flight holds up to its
/// route's limit (1 MiB for a binding batch). Sixty connections each trickling a 4 MiB batch once
/// took the server from 100 to 325 MB. A request reserves its body's size (its `Content-Length`,
/// or the route's limit when it does not say) before reading it, and gives it back once read;
/// a request that would pass the budget is refused at once, `503 server_busy` with
/// `Retry-After`, before a byte of its body is read.
///
/// Each server has its own (``ServerConfiguration/bodyBytesInFlight``), which
/// ``BodyBudgetMiddleware`` makes the request's ``current``.
final class BodyBudget: Sendable {
    /// The budget of the request being handled; none outside a server's requests.
    @TaskLocal static var current: BodyBudget?

    private let bytes: Int
    private let reserved = Mutex(0)

    init(bytes: Int) {
        self.bytes = bytes
    }

    /// How many bytes are reserved now.
    var inUse: Int { reserved.withLock { $0 } }

    /// Reserves `size` bytes while `read` runs.
    /// - Throws: `503 server_busy` when the budget has no room for them.
    func reserving<T>(_ size: Int, _ read: () async throws -> T) async throws -> T {
        let granted = reserved.withLock { reserved in
            guard reserved + size <= bytes else { return false }
            reserved += size
            return true
        }
        guard granted else { throw Self.busy }
        defer { reserved.withLock { $0 -= size } }
        return try await read()
    }

    static let busy = RingRelayError(
        .unavailable, code: .serverBusy, "The server is reading as many request bodies as it holds at once; retry shortly.",
        retryAfter: .seconds(1))
}

/// Makes the server's ``BodyBudget`` the one its requests read their bodies within.
struct BodyBudgetMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext

    let budget: BodyBudget

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await BodyBudget.$current.withValue(budget) { try await next(request, context) }
    }
}
