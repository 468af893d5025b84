import Foundation
import Hummingbird
import RingRelayCore

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
