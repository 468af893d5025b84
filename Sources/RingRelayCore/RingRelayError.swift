import Foundation
import RingRelayWire

/// The one error type of RingRelay's domain.
///
/// Every failure a client can cause or see is a `RingRelayError`: a stable machine-readable
/// ``code`` (snake_case, part of the API contract), a ``kind`` that the server maps to an HTTP
/// status in exactly one place, and a ``message`` that says what went wrong and how to fix it.
/// The ``underlying`` cause and the source location are for logs only and never reach a client.
///
/// ```swift
/// throw RingRelayError(.conflict, code: .apnsNotConfigured, "The account has no APNs credentials; upload them with PUT /v1/credentials/apns.")
/// ```
public struct RingRelayError: Error, Sendable, CustomStringConvertible {
    /// The class of failure; decides the HTTP status.
    public enum Kind: Sendable, Hashable {
        /// The request could not be read at all (for example malformed JSON).
        case badRequest
        /// No credentials, or credentials that are not valid.
        case unauthenticated
        /// Valid credentials that may not do this, or a bad webhook signature.
        case forbidden
        /// The resource does not exist, or the caller may not know that it exists.
        case notFound
        /// The request conflicts with the current state.
        case conflict
        /// The body is larger than the server accepts.
        case payloadTooLarge
        /// The body is not JSON.
        case unsupportedMediaType
        /// Well-formed input that breaks a rule (missing field, bad token, unknown field).
        case unprocessable
        /// Too many requests.
        case rateLimited
        /// A dependency (the store) cannot be reached right now.
        case unavailable
        /// A defect on our side. Never the answer to bad input.
        case `internal`
    }

    /// What kind of failure this is.
    public var kind: Kind
    /// Stable snake_case code clients can switch on, e.g. `invalid_token`.
    public var code: String
    /// Human-readable explanation that names the fix. Never contains secrets.
    public var message: String
    /// The cause, for logs only.
    public var underlying: (any Error)?
    /// Where the error was created, for logs only.
    public var location: String
    /// For `rateLimited`: when the client may try again (sent as `Retry-After`).
    public var retryAfter: Duration?
    /// For call conflicts: the call's current state, sent with the error.
    public var state: String?

    /// Creates an error.
    public init(
        _ kind: Kind,
        code: String,
        _ message: String,
        underlying: (any Error)? = nil,
        retryAfter: Duration? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.retryAfter = retryAfter
        self.kind = kind
        self.code = code
        self.message = message
        self.underlying = underlying
        self.location = "\(file):\(line)"
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let underlying { text += " (cause: \(underlying))" }
        return text
    }
}

extension RingRelayError {
    /// A required field is absent.
    ///
    /// - Parameter field: its path; a path through a client's object names the client's keys, so
    ///   it is cut as client text is (``ClientText/echo(_:)``).
    public static func missingField(_ field: String, file: String = #fileID, line: Int = #line) -> Self {
        .init(.unprocessable, code: Code.missingField, "The field '\(ClientText.echo(field))' is required.", file: file, line: line)
    }

    /// A field is present but its value breaks a rule.
    ///
    /// - Parameters:
    ///   - field: its path, cut as client text is (``ClientText/echo(_:)``).
    ///   - why: the rule; any client text in it goes through ``ClientText/echo(_:)`` first.
    public static func invalidField(_ field: String, _ why: String, file: String = #fileID, line: Int = #line) -> Self {
        .init(.unprocessable, code: Code.invalidField, "The field '\(ClientText.echo(field))' is invalid: \(why)", file: file, line: line)
    }

    /// A resource that does not exist for this caller; the code is `<resource>_not_found`
    /// (`account_not_found`, `key_not_found`, `binding_not_found`, `call_not_found`).
    ///
    /// - Parameter id: the id asked for, as the client sent it (a path segment can be as long as
    ///   the request line): cut by ``ClientText/echo(_:)``.
    public static func notFound(_ resource: String, id: String, file: String = #fileID, line: Int = #line) -> Self {
        .init(
            .notFound, code: "\(resource)_not_found", "No \(resource) with id '\(ClientText.echo(id))' exists.",
            file: file, line: line)
    }

    /// The caller lacks the role this operation needs.
    public static func forbidden(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        .init(.forbidden, code: .forbidden, message, file: file, line: line)
    }
}
