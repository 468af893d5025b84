import Foundation
import RingRelayCore

/// Every FCM `ErrorCode`, with a fallback that keeps codes Google adds later verbatim.
///
/// FCM puts it in `error.details[]`, in the entry whose `@type` is
/// `type.googleapis.com/google.firebase.fcm.v1.FcmError`; the top-level `status` is only the
/// generic RPC code (`NOT_FOUND` for `UNREGISTERED`).
public enum FCMErrorCode: Sendable, Hashable, CustomStringConvertible {
    case unspecifiedError, invalidArgument, unregistered, senderIDMismatch, quotaExceeded, unavailable, `internal`
    case thirdPartyAuthError
    /// The legacy name of ``thirdPartyAuthError``.
    case apnsAuthError
    /// A code this version does not know.
    case unknown(String)

    private static let known: [String: FCMErrorCode] = [
        "UNSPECIFIED_ERROR": .unspecifiedError, "INVALID_ARGUMENT": .invalidArgument, "UNREGISTERED": .unregistered,
        "SENDER_ID_MISMATCH": .senderIDMismatch, "QUOTA_EXCEEDED": .quotaExceeded, "UNAVAILABLE": .unavailable,
        "INTERNAL": .internal, "THIRD_PARTY_AUTH_ERROR": .thirdPartyAuthError, "APNS_AUTH_ERROR": .apnsAuthError,
    ]
    private static let names = Dictionary(uniqueKeysWithValues: known.map { ($1, $0) })

    /// Parses a code.
    public init(_ text: String) {
        self = Self.known[text] ?? .unknown(text)
    }

    /// The code as FCM spells it.
    public var description: String {
        if case .unknown(let text) = self { return text }
        return Self.names[self] ?? "UNSPECIFIED_ERROR"
    }
}

/// Google's error envelope: `{"error":{"code","message","status","details":[…]}}`.
public struct FCMErrorBody: Sendable, Hashable {
    /// `error.code`: the HTTP status.
    public var code: Int?
    /// `error.message`.
    public var message: String?
    /// `error.status`: the RPC status (`INVALID_ARGUMENT`, `NOT_FOUND`, `UNAUTHENTICATED`, …).
    public var status: String?
    /// `errorCode` of the `FcmError` detail.
    public var errorCode: FCMErrorCode?
    /// `field` of every `BadRequest` field violation.
    public var violatedFields: [String]

    /// Creates a body.
    public init(code: Int?, message: String?, status: String?, errorCode: FCMErrorCode?, violatedFields: [String] = []) {
        self.code = code
        self.message = message
        self.status = status
        self.errorCode = errorCode
        self.violatedFields = violatedFields
    }

    /// Parses an error body; `nil` when it is not Google's envelope (an HTML error page, say).
    public init?(json: some DataProtocol) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
            let error = object["error"] as? [String: Any]
        else { return nil }
        code = error["code"] as? Int
        message = error["message"] as? String
        status = error["status"] as? String
        errorCode = nil
        violatedFields = []
        for detail in error["details"] as? [[String: Any]] ?? [] {
            switch detail["@type"] as? String {
            case "type.googleapis.com/google.firebase.fcm.v1.FcmError":
                if let code = detail["errorCode"] as? String { errorCode = FCMErrorCode(code) }
            case "type.googleapis.com/google.rpc.BadRequest":
                for violation in detail["fieldViolations"] as? [[String: Any]] ?? [] {
                    if let field = violation["field"] as? String { violatedFields.append(field) }
                }
            default:
                continue
            }
        }
    }

    /// Whether the error is about the registration token rather than the message.
    ///
    /// Firebase's token guide treats `INVALID_ARGUMENT` on a token send as a sign of a bad token,
    /// but the same code covers a bad payload, TTL or package name. So a 400 counts as a token
    /// error only when it says so: a field violation on `message.token`, or — without field
    /// violations — a message naming the registration token ("The registration token is not a
    /// valid FCM registration token"). A violation on another field (`message.data[0].value`)
    /// never counts, whatever its message quotes.
    public var namesRegistrationToken: Bool {
        if !violatedFields.isEmpty { return violatedFields.contains("message.token") }
        return message?.lowercased().contains("registration token") == true
    }

    /// The outcome reason: the FCM error code, else the RPC status, else `HTTP<status>`.
    public func reason(httpStatus: Int) -> String {
        errorCode?.description ?? status ?? "HTTP\(httpStatus)"
    }
}

/// Maps an FCM answer to what RingRelay does about it.
public enum FCMDispositionRules {
    /// The disposition of a status and error body.
    ///
    /// - `UNREGISTERED` → invalidate the binding; `INVALID_ARGUMENT` naming the token → invalidate,
    ///   any other `INVALID_ARGUMENT` → drop (our message was wrong; the token may be fine).
    /// - `QUOTA_EXCEEDED`, `UNAVAILABLE`, `INTERNAL`, and 429/5xx without a code → retry.
    /// - `SENDER_ID_MISMATCH`, `THIRD_PARTY_AUTH_ERROR`, 401 and 403 → fix configuration.
    /// - A 404 without `UNREGISTERED` (unknown project or path) → fix configuration: a wrong
    ///   endpoint or project must never invalidate bindings.
    public static func disposition(status: Int, error: FCMErrorBody?) -> PushDisposition {
        if (200..<300).contains(status) { return .delivered }
        switch error?.errorCode {
        case .unregistered?:
            return .invalidateBinding
        case .invalidArgument?:
            return error?.namesRegistrationToken == true ? .invalidateBinding : .drop
        case .senderIDMismatch?, .thirdPartyAuthError?, .apnsAuthError?:
            return .fixConfiguration
        case .quotaExceeded?, .unavailable?, .internal?:
            return .retry
        case .unspecifiedError?, .unknown?, nil:
            switch status {
            case 400: return error?.namesRegistrationToken == true ? .invalidateBinding : .drop
            case 401, 403, 404: return .fixConfiguration
            case 408, 429, 500...599: return .retry
            default: return .drop
            }
        }
    }
}
