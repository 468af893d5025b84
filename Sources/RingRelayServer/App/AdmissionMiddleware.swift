import Hummingbird
import RingRelayCore

/// Refuses requests that start calls while the server is behind (``Admission``), before anything
/// else reads the store: authenticating the key or checking a webhook's signature would queue for a
/// database connection behind the very line the refusal is about.
///
/// `POST /v1/calls` and `POST /v1/webhooks/…`; every other request goes on, so calls already
/// ringing can still be answered, cancelled and read.
struct AdmissionMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext

    let admission: Admission

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == .post, Self.startsCalls(request.uri.path) else { return try await next(request, context) }
        try admission.admit()
        // A native call answers once its ring started: how long that takes is how far behind the
        // server is. (A webhook waits for the devices' first answers, which says nothing of it.)
        guard request.uri.path == "/v1/calls" else { return try await next(request, context) }
        let started = ContinuousClock.now
        let response = try await next(request, context)
        if response.status == .created { admission.calls.record(.now - started) }
        return response
    }

    static func startsCalls(_ path: String) -> Bool {
        path == "/v1/calls" || path.hasPrefix("/v1/webhooks/")
    }
}
