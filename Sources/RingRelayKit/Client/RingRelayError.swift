import Foundation
import RingRelayWire

/// Everything that can go wrong talking to RingRelay or acting on a call.
public enum RingRelayError: Error, Sendable, Hashable {
    /// The server answered with an error.
    case server(ServerError)
    /// No answer: the connection failed, or the access-token provider threw.
    case transport(String)
    /// The server's answer could not be read.
    case invalidResponse(String)
    /// The call is not in a state that allows the action (answering a call that is already over,
    /// holding a call that rings).
    case invalidCallState(CallState)
    /// The action needs the server, but the manager has no ``CallSignaling``.
    case noSignaling
    /// The call already has as many concurrent calls as ``CallManager/Configuration/maximumCalls``.
    case tooManyCalls
    /// A sealed call could not be placed: the client has no ``RingRelayClient/Configuration/sealedCalls``,
    /// the callee has no device key, an invite is too large (metadata), or the file of known keys
    /// could not be used. Nothing was sent to the callee.
    case sealedCall(String)

    /// The server error, if this is one.
    public var serverError: ServerError? {
        if case .server(let error) = self { error } else { nil }
    }
}

/// An error answer from the server: `{"error":{"code","message","state"?}}` and its status.
public struct ServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status.
    public var status: Int
    /// The stable error code.
    public var code: Code
    /// What went wrong and how to fix it.
    public var message: String
    /// For a call command that came too late (409): the call's state then (`accepted`, `cancelled`, …).
    public var callState: String?

    /// Creates an error.
    public init(status: Int, code: Code, message: String, callState: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.callState = callState
    }

    init(status: Int, body: ErrorBody.Detail) {
        self.init(status: status, code: Code(rawValue: body.code), message: body.message, callState: body.state)
    }

    public var description: String { "\(status) \(code.rawValue): \(message)" }

    /// The kind of failure, from the status.
    public var kind: Kind { Kind(status: status) }

    /// The kinds of failure the API distinguishes by status.
    public enum Kind: Sendable, Hashable {
        /// 400: the request is malformed.
        case badRequest
        /// 401: no or bad credentials (the SDK has already retried once with a fresh token).
        case unauthorized
        /// 403: not allowed.
        case forbidden
        /// 404: unknown resource.
        case notFound
        /// 409: conflict; for call commands the call moved on (see ``ServerError/callState``).
        case conflict
        /// 422: well-formed but invalid.
        case unprocessable
        /// 429: rate limited.
        case rateLimited
        /// Any other status.
        case other

        init(status: Int) {
            switch status {
            case 400: self = .badRequest
            case 401: self = .unauthorized
            case 403: self = .forbidden
            case 404: self = .notFound
            case 409: self = .conflict
            case 422: self = .unprocessable
            case 429: self = .rateLimited
            default: self = .other
            }
        }
    }

    /// A server error code. Known codes have constants; others keep their raw value.
    public struct Code: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }

        /// Accept or reject of a call that no longer rings.
        public static let callNotRinging: Code = "call_not_ringing"
        /// End of a call that is not accepted.
        public static let callNotActive: Code = "call_not_active"
        /// Too many requests.
        public static let rateLimited: Code = "rate_limited"
        /// The bearer token is missing or not valid.
        public static let invalidCredentials: Code = "invalid_credentials"
        /// The access token's account no longer exists.
        public static let invalidAccessToken: Code = "invalid_access_token"
        /// No call with that id (or not one of this device's).
        public static let callNotFound: Code = "call_not_found"
        /// No binding with that id (or not one of this device's).
        public static let bindingNotFound: Code = "binding_not_found"
        /// The key directory knows no such identity in this account: it has no active binding.
        public static let identityNotFound: Code = "identity_not_found"
        /// A required field is missing.
        public static let missingField: Code = "missing_field"
        /// A field has an invalid value.
        public static let invalidField: Code = "invalid_field"
    }
}
