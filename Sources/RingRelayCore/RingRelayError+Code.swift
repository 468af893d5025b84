import Foundation

extension RingRelayError {
    /// A stable, machine-readable error code: the `error.code` of an error body, part of the API
    /// contract (`docs/openapi.yaml` lists them).
    ///
    /// Every code the server can answer with is a named constant below, so a code is spelled once
    /// and a rename is a compile error rather than a silent change of the contract:
    ///
    /// ```swift
    /// throw RingRelayError(.conflict, code: .apnsNotConfigured, "The account has no APNs credentials; …")
    /// ```
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The snake_case code as clients see it.
        public var rawValue: String

        /// Creates a code from its snake_case text.
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// The snake_case code.
        public var description: String { rawValue }
    }

    /// Creates an error with a named code.
    ///
    /// - Parameters:
    ///   - kind: the class of failure; decides the HTTP status.
    ///   - code: the stable code clients switch on.
    ///   - message: what went wrong and how to fix it; never a secret.
    ///   - underlying: the cause, for logs only.
    ///   - retryAfter: for `rateLimited`, when to try again.
    public init(
        _ kind: Kind, code: Code, _ message: String, underlying: (any Error)? = nil, retryAfter: Duration? = nil, file: String = #fileID,
        line: Int = #line
    ) {
        self.init(kind, code: code.rawValue, message, underlying: underlying, retryAfter: retryAfter, file: file, line: line)
    }
}

extension RingRelayError.Code {
    // MARK: Requests

    /// The request could not be read (Hummingbird refused it).
    public static let badRequest = Self(rawValue: "bad_request")
    /// The HTTP/1 parser refused the request; the listener answers and closes the connection.
    public static let invalidRequest = Self(rawValue: "invalid_request")
    /// The request's body did not arrive within the body timeout; the connection is closed.
    public static let requestTimeout = Self(rawValue: "request_timeout")
    /// The body is larger than the server accepts.
    public static let bodyTooLarge = Self(rawValue: "body_too_large")
    /// The request needs a body and has none.
    public static let emptyBody = Self(rawValue: "empty_body")
    /// The body is not valid JSON (or not a JSON object where one is needed).
    public static let malformedJSON = Self(rawValue: "malformed_json")
    /// The body is JSON but not an object.
    public static let invalidBody = Self(rawValue: "invalid_body")
    /// The body is not sent as JSON.
    public static let unsupportedMediaType = Self(rawValue: "unsupported_media_type")
    /// No route answers this method and path.
    public static let routeNotFound = Self(rawValue: "route_not_found")
    /// A required field is absent.
    public static let missingField = Self(rawValue: "missing_field")
    /// A field breaks a rule.
    public static let invalidField = Self(rawValue: "invalid_field")
    /// A field that is not part of the request (strict decoding).
    public static let unknownField = Self(rawValue: "unknown_field")
    /// A required query parameter is absent.
    public static let missingParameter = Self(rawValue: "missing_parameter")
    /// A query parameter breaks a rule.
    public static let invalidParameter = Self(rawValue: "invalid_parameter")
    /// A query parameter the operation does not take.
    public static let unknownParameter = Self(rawValue: "unknown_parameter")
    /// A pagination cursor this server did not issue.
    public static let invalidCursor = Self(rawValue: "invalid_cursor")
    /// Too many requests for the account.
    public static let rateLimited = Self(rawValue: "rate_limited")
    /// A defect on the server's side.
    public static let internalError = Self(rawValue: "internal_error")

    // MARK: Authentication

    /// No credentials on a protected endpoint.
    public static let missingCredentials = Self(rawValue: "missing_credentials")
    /// A bearer token of no known kind, or sent where it may not be.
    public static let invalidCredentials = Self(rawValue: "invalid_credentials")
    /// An unknown or revoked account API key.
    public static let invalidAPIKey = Self(rawValue: "invalid_api_key")
    /// A device access token that does not verify, or whose account is gone.
    public static let invalidAccessToken = Self(rawValue: "invalid_access_token")
    /// A device access token past its expiry.
    public static let expiredAccessToken = Self(rawValue: "expired_access_token")
    /// A device access token minted before its device was signed out (its last binding, or
    /// every binding of its identity, deleted): signing in again means minting a new one.
    public static let deviceSignedOut = Self(rawValue: "device_signed_out")
    /// Valid credentials that may not do this.
    public static let forbidden = Self(rawValue: "forbidden")

    // MARK: Resources

    /// An account name already in use.
    public static let accountNameTaken = Self(rawValue: "account_name_taken")
    /// No credential of the kind is configured.
    public static let credentialNotFound = Self(rawValue: "credential_not_found")
    /// A binding token that is not valid for its type.
    public static let invalidToken = Self(rawValue: "invalid_token")
    /// An identity with no active binding in the account (the key directory).
    public static let identityNotFound = Self(rawValue: "identity_not_found")
    /// A batch with more items than allowed.
    public static let batchTooLarge = Self(rawValue: "batch_too_large")

    // MARK: Pushes

    /// The account has no APNs credential.
    public static let apnsNotConfigured = Self(rawValue: "apns_not_configured")
    /// The account has no FCM service account.
    public static let fcmNotConfigured = Self(rawValue: "fcm_not_configured")
    /// A payload that cannot go to the binding's channel.
    public static let channelNotSupported = Self(rawValue: "channel_not_supported")
    /// A push client's extra trust roots cannot be read.
    public static let pushCAFileUnusable = Self(rawValue: "push_ca_file_unusable")
    /// The configured APNs endpoint is not a URL.
    public static let apnsEndpointInvalid = Self(rawValue: "apns_endpoint_invalid")
    /// The configured FCM endpoint is not a URL.
    public static let fcmEndpointInvalid = Self(rawValue: "fcm_endpoint_invalid")

    // MARK: Calls

    /// The callee has neither a live connection nor an active binding.
    public static let noReachableDevice = Self(rawValue: "no_reachable_device")
    /// A command that needs a ringing call.
    public static let callNotRinging = Self(rawValue: "call_not_ringing")
    /// A command that needs an accepted call.
    public static let callNotActive = Self(rawValue: "call_not_active")
    /// A provider call, which only its provider cancels.
    public static let callNotCancellable = Self(rawValue: "call_not_cancellable")
    /// `POST /v1/calls` named a `callId` that a call has already.
    public static let callIdTaken = Self(rawValue: "call_id_taken")

    // MARK: Webhooks

    /// The provider's signature header is absent.
    public static let missingSignature = Self(rawValue: "missing_signature")
    /// The signature does not match the account's webhook credential (or there is none).
    public static let invalidSignature = Self(rawValue: "invalid_signature")
    /// A Twilio webhook for another Twilio account.
    public static let accountSIDMismatch = Self(rawValue: "account_sid_mismatch")

    // MARK: Live connections

    /// `GET /v1/connect` without a WebSocket upgrade.
    public static let webSocketRequired = Self(rawValue: "websocket_required")
    /// A binary frame on a live connection.
    public static let textFramesOnly = Self(rawValue: "text_frames_only")
    /// A frame that is not one JSON object with a `type`.
    public static let malformedFrame = Self(rawValue: "malformed_frame")

    /// A binding would pass the identity's (`--max-bindings-per-identity`) or the account's
    /// (`--max-bindings-per-account`) number of bindings.
    public static let tooManyBindings = Self(rawValue: "too_many_bindings")

    // MARK: Operations

    /// The data directory cannot be created or written.
    public static let dataDirUnusable = Self(rawValue: "data_dir_unusable")
    /// The server cannot bind its address (a port in use, a privileged port, an unknown host address).
    public static let listenFailed = Self(rawValue: "listen_failed")
    /// The database cannot be opened or prepared.
    public static let storeUnavailable = Self(rawValue: "store_unavailable")
    /// The server is behind (its database or the instances' bus answers late): a new call is
    /// refused at once, with `Retry-After`, rather than accepted and rung late.
    public static let overloaded = Self(rawValue: "overloaded")
    /// The server holds as many request bodies as it reads at once; retry shortly.
    public static let serverBusy = Self(rawValue: "server_busy")
    /// The database is closed (the server is shutting down).
    public static let storeClosed = Self(rawValue: "store_closed")
    /// A statement did not do what it must.
    public static let storeError = Self(rawValue: "store_error")
    /// A stored row holds a value this version does not know.
    public static let storeCorrupt = Self(rawValue: "store_corrupt")
}
