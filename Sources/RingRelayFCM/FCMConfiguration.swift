import Foundation
import RingRelayCore

/// How RingRelay reaches FCM. Where OAuth goes is not configured here: each service account's own
/// `token_uri` decides it.
public struct FCMConfiguration: Sendable {
    /// Base URL of the FCM HTTP v1 API.
    public var endpoint = "https://fcm.googleapis.com"
    /// PEM file of extra certificates to trust, for a local simulator. The system's roots are
    /// always trusted.
    public var extraTrustRootsFile: String?
    /// Longest wait for one answer (a send or a token exchange).
    public var requestTimeout: Duration = .seconds(10)
    /// Attempts per message for transient failures (429, 5xx, timeouts, dropped connections).
    public var maxAttempts = 3
    /// First back-off; each retry doubles it, with full jitter. A `Retry-After` is waited on top.
    public var retryBaseDelay: Duration = .milliseconds(100)
    /// An access token is replaced when less than this is left of its lifetime.
    public var tokenRefreshMargin: Duration = .seconds(5 * 60)
    /// After the token endpoint rejects a service account, further pushes with it fail at once
    /// for this long instead of asking again (new credentials are tried at once).
    public var rejectedAccountHoldOff: Duration = .seconds(30)

    /// Connections to the endpoint at most; more open only when every stream of the open ones is in use.
    public var maxConnections = 4
    /// A connection whose messages get no frame for this long is PINGed, and closed if nothing
    /// comes within as long again; its unanswered messages go again on another connection.
    public var connectionSilenceTimeout: Duration = .seconds(3)

    /// The defaults: Google's endpoint.
    public init() {}

    /// The `:path` of a project's send request: the endpoint's own path, then `/v1/projects/{project_id}/messages:send`.
    public func sendPath(projectID: String) -> String {
        let project = projectID.addingPercentEncoding(withAllowedCharacters: .fcmPathSegment) ?? projectID
        var base = URLComponents(string: endpoint)?.path ?? ""
        while base.hasSuffix("/") { base.removeLast() }
        return base + "/v1/projects/" + project + "/messages:send"
    }
}

extension CharacterSet {
    /// Characters a path segment may carry unescaped (RFC 3986 unreserved).
    static let fcmPathSegment = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
}
