import RingRelayCore

/// Why no access token could be had for a service account. Never carries key material,
/// assertions or tokens.
public struct FCMOAuthError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The outcome reason: `OAuth` + the token endpoint's `error` in PascalCase (`OAuthInvalidGrant`,
    /// `OAuthInvalidScope`, …), `OAuthUnavailable`, `OAuthTimeout`, `OAuthConnectionError`,
    /// `OAuthInvalidResponse`, `InvalidCredential` when the key cannot sign, or `ClientShutDown`.
    public var reason: String
    /// What to do about it: ``PushDisposition/fixConfiguration`` for rejected credentials,
    /// ``PushDisposition/retry`` for transient trouble at the token endpoint, ``PushDisposition/drop``
    /// once the client is shut down.
    public var disposition: PushDisposition
    /// The token endpoint's HTTP status, when it answered.
    public var status: Int?
    /// What went wrong, e.g. Google's `error_description`.
    public var detail: String

    /// Creates an error.
    public init(reason: String, disposition: PushDisposition, status: Int? = nil, detail: String) {
        self.reason = reason
        self.disposition = disposition
        self.status = status
        self.detail = detail
    }

    /// The stored service account cannot be used to sign (missing or unreadable key).
    public static func invalidCredential(_ detail: String) -> FCMOAuthError {
        FCMOAuthError(reason: "InvalidCredential", disposition: .fixConfiguration, detail: detail)
    }

    /// The reason for a token endpoint `error` code: `invalid_grant` → `OAuthInvalidGrant`.
    public static func reason(forOAuthError error: String) -> String {
        knownOAuthErrors[error] ?? "OAuthError"
    }

    /// The error codes of RFC 6749 §5.2 and Google's token endpoint, as reasons. Anything else is
    /// `OAuthError`: the endpoint's text never becomes a reason, so it never reaches an API answer.
    static let knownOAuthErrors: [String: String] = [
        "invalid_request": "OAuthInvalidRequest", "invalid_client": "OAuthInvalidClient", "invalid_grant": "OAuthInvalidGrant",
        "unauthorized_client": "OAuthUnauthorizedClient", "unsupported_grant_type": "OAuthUnsupportedGrantType",
        "invalid_scope": "OAuthInvalidScope", "access_denied": "OAuthAccessDenied", "temporarily_unavailable": "OAuthTemporarilyUnavailable",
        "server_error": "OAuthServerError",
    ]

    public var description: String {
        "\(reason): \(detail)"
    }
}
