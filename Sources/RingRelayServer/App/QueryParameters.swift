import Foundation
import Hummingbird
import RingRelayCore
import RingRelayWire

/// Reading query parameters the same way on every listing: a bad value is a 422
/// `invalid_parameter` naming the parameter and the rule, a missing one `missing_parameter`.
enum QueryParameter {
    /// The error for a parameter that breaks a rule.
    static func invalid(_ name: String, _ why: String) -> RingRelayError {
        RingRelayError(.unprocessable, code: .invalidParameter, "The query parameter '\(name)' is invalid: \(why)")
    }

    /// Checks `?identity=` with the identity rules, reported as a query-parameter error.
    static func identity(_ identity: String) throws(RingRelayError) -> String {
        do {
            try BindingRules.validateIdentity(identity)
        } catch {
            throw invalid(
                "identity", "must be 1–\(BindingRules.maxIdentityLength) bytes as UTF-8, without control, format or line-separator characters.")
        }
        return identity
    }

    /// The identity a listing covers: `?identity=` (checked) for an account key; for a device
    /// token its own identity, which `?identity=` may repeat but not change (403).
    ///
    /// - Parameter what: what is listed, for the 403's message ("bindings", "calls").
    static func scopedIdentity(_ parameters: Parameters, scope: AccountScope, listing what: String) throws(RingRelayError) -> String? {
        let requested = try parameters["identity"].map { text throws(RingRelayError) in try identity(String(text)) }
        guard let own = scope.identity else { return requested }
        if let requested, requested != own {
            throw RingRelayError.forbidden("A device access token can only list its own identity's \(what).")
        }
        return own
    }

    /// Reads `?limit=`: a whole number from 1 to `max`.
    static func limit(_ text: String, max: Int) throws(RingRelayError) -> Int {
        guard let limit = Int(text), (1...max).contains(limit) else {
            throw invalid("limit", "must be a whole number from 1 to \(max).")
        }
        return limit
    }

    /// Reads an RFC 3339 time such as `2026-05-01T08:00:00Z`, `2026-05-01T10:00:00.250+02:00`,
    /// to the nearest millisecond (the store's precision), so `.250` is exactly 250 ms.
    ///
    /// A `+` that arrived unencoded reads as a space in a query string; it is taken back as `+`.
    static func time(_ name: String, _ text: String) throws(RingRelayError) -> Date {
        let restored = text.replacingOccurrences(of: " ", with: "+")
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        guard restored.count <= 40, let date = plain.date(from: restored) ?? fractional.date(from: restored) else {
            throw invalid(name, "must be an RFC 3339 time such as 2026-05-01T08:00:00Z (encode a '+' offset as %2B).")
        }
        return Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
    }
}

extension QueryParameter {
    /// The query parameters each operation takes, by method and route template, as
    /// docs/openapi.yaml lists them. Any other is refused, as an unknown body field is: a typo
    /// (`?identiy=`) must not silently widen a listing or a deletion.
    static let accepted: [String: Set<String>] = [
        "GET /v1/bindings": ["identity", "type", "status", "limit", "cursor"],
        "DELETE /v1/bindings": ["identity"],
        "GET /v1/calls": ["identity", "direction", "state", "since", "until", "limit", "cursor"],
        "GET /v1/calls/{callId}/deliveries": ["limit", "cursor"],
        "GET /v1/connect": ["lastEventId"],
    ]

    /// Taken by every operation: the device access token, for clients that cannot set headers.
    static let everywhere: Set<String> = ["access_token"]

    /// Routes whose query strings are not the API's to judge: a provider signs the URL it was
    /// given, query and all (Twilio adds `bodySHA256`), and probes, scrapers and browsers add
    /// their own to the ops pages (a refused readiness probe takes the instance out of service).
    static let unchecked: Set<String> = [
        "/v1/webhooks/twilio/{accountId}", "/v1/webhooks/webex/{accountId}", "/", "/healthz", "/readyz", "/metrics", "/openapi.yaml",
    ]

    /// The most unknown parameters an error names; it counts the rest.
    static let maxNamedUnknown = 5

    /// Checks a request's query against what its operation takes.
    ///
    /// - Parameter route: the matched route template; `nil` when no route matched (a 404 follows).
    /// - Throws: 422 `unknown_parameter` naming the parameters the operation does not take (the
    ///   first ``maxNamedUnknown``, each cut by ``ClientText``); 422 `invalid_parameter` for one
    ///   given twice.
    static func check(_ parameters: Parameters, method: String, route: String?) throws(RingRelayError) {
        guard let route, !unchecked.contains(route) else { return }
        let known = accepted["\(method) \(route)", default: []].union(everywhere)
        var seen = Set<Substring>()
        var unknown = Set<String>()
        // A bare `&` (as in `?a=1&&b=2`) separates nothing and names nothing.
        for (name, value) in parameters where !(name.isEmpty && value.isEmpty) {
            guard known.contains(String(name)) else {
                unknown.insert(String(name))
                continue
            }
            guard seen.insert(name).inserted else { throw invalid(String(name), "it is given more than once; pass it once.") }
        }
        guard unknown.isEmpty else {
            // The names are the client's text: each is cut, and a query of thousands is not echoed.
            var names = unknown.sorted().prefix(maxNamedUnknown).map { "'\(ClientText.echo($0))'" }.joined(separator: ", ")
            if unknown.count > maxNamedUnknown { names += " and \(unknown.count - maxNamedUnknown) more" }
            throw RingRelayError(
                .unprocessable, code: .unknownParameter,
                unknown.count == 1
                    ? "The query parameter \(names) is not part of this request; check its spelling."
                    : "The query parameters \(names) are not part of this request; check their spelling.")
        }
    }
}

/// Refuses query parameters the matched operation does not take (``QueryParameter/check(_:method:route:)``).
struct QueryParameterMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // The query is parsed only for routes that judge it (not for every webhook).
        if let route = context.endpointPath, !QueryParameter.unchecked.contains(route) {
            try QueryParameter.check(request.uri.queryParameters, method: request.method.rawValue, route: route)
        }
        return try await next(request, context)
    }
}
