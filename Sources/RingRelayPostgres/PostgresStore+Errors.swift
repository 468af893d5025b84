import Foundation
import PostgresNIO
import RingRelayCore

/// What went wrong, for logs: the server's SQLSTATE and message, or the client's own code and
/// cause (a refused connection, a timeout). postgres-nio's own error describes itself only as
/// "Generic description", to keep query values out of logs by default; this keeps them out too
/// (no query, no detail) but names the failure.
struct PostgresFailure: Error, CustomStringConvertible {
    /// The SQLSTATE, e.g. `23505` for a unique violation; `nil` when the server said nothing.
    var sqlState: String?
    var description: String

    static let uniqueViolation = "23505"

    init(_ error: PSQLError) {
        if error.code == .server {
            let state = error.serverInfo?[.sqlState] ?? ""
            sqlState = state
            description = "PostgreSQL \(state): \(error.serverInfo?[.message] ?? "")"
        } else {
            description = "PostgreSQL client \(error.code)" + (error.underlying.map { ": \($0)" } ?? "")
        }
    }

    /// `error`, described, when it is postgres-nio's.
    static func cause(_ error: any Error) -> any Error {
        (error as? PSQLError).map(PostgresFailure.init) ?? error
    }
}

extension PostgresStore {
    /// The error of a store that was closed.
    static var closedError: RingRelayError {
        RingRelayError(.unavailable, code: .storeClosed, "The database is closed; the server is shutting down.")
    }

    /// The error of a database that cannot be reached right now (503).
    static func unavailable(_ cause: any Error) -> RingRelayError {
        RingRelayError(
            .unavailable, code: .storeUnavailable, "The database cannot be reached right now; retry shortly.",
            underlying: PostgresFailure.cause(cause))
    }

    /// Any error of a statement as a ``RingRelayError``.
    ///
    /// The connection failing (refused, closed, the server shutting down or out of
    /// connections) is `store_unavailable`, a 503 the client may retry. A statement the server
    /// refused is a defect (`store_error`); callers that expect a refusal (a unique name) check
    /// ``sqlState(of:)`` first.
    static func storeError(_ error: any Error) -> RingRelayError {
        switch error {
        case let error as RingRelayError:
            return error
        case let error as PostgresTransactionError:
            // What went wrong first: beginning, the statements, or committing.
            guard let first = error.beginError ?? error.closureError ?? error.commitError ?? error.rollbackError else { return unavailable(error) }
            return storeError(first)
        case let error as PSQLError where error.code == .server:
            let failure = PostgresFailure(error)
            let state = failure.sqlState ?? ""
            // Class 08: connection exception; 53: insufficient resources (too many
            // connections); 57P: the server is shutting down or starting up.
            if state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57P") { return unavailable(failure) }
            return RingRelayError(.internal, code: .storeError, "The database refused a statement.", underlying: failure)
        case is PostgresDecodingError:
            return RingRelayError(.internal, code: .storeCorrupt, "A stored value has an unexpected type.", underlying: error)
        case let error as PSQLError
        where [.tooManyParameters, .invalidCommandTag, .messageDecodingFailure, .unexpectedBackendMessage].contains(error.code):
            return RingRelayError(.internal, code: .storeError, "The database answered unexpectedly.", underlying: PostgresFailure(error))
        default:
            // The connection: refused, reset, closed, TLS or authentication on connecting.
            return unavailable(error)
        }
    }

    /// The SQLSTATE of a statement the server refused, or `nil`.
    static func sqlState(of error: any Error) -> String? {
        ((error as? RingRelayError)?.underlying as? PostgresFailure)?.sqlState
    }
}

extension PostgresRandomAccessRow {
    func string(_ column: String) throws -> String { try self[column].decode(String.self) }
    func optionalString(_ column: String) throws -> String? { try self[column].decode(String?.self) }
    func integer(_ column: String) throws -> Int { try self[column].decode(Int.self) }
    func optionalInteger(_ column: String) throws -> Int? { try self[column].decode(Int?.self) }
    func boolean(_ column: String) throws -> Bool { try self[column].decode(Bool.self) }
    func date(_ column: String) throws -> Date { Date(millis: try integer(column)) }
    func optionalDate(_ column: String) throws -> Date? { try optionalInteger(column).map(Date.init(millis:)) }
}
