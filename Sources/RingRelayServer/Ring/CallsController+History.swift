import Foundation
import Hummingbird
import RingRelayCore
import RingRelayWire

/// `GET /v1/calls`: the call history, newest first, one page at a time.
///
/// Parameters: `identity` (calls it took part in, as callee or as the caller of a native call),
/// `direction` (`incoming` or `outgoing`, relative to that identity), `state` (one state or a
/// comma-separated list), `since` (inclusive) and `until` (exclusive) as RFC 3339 times on the
/// creation time, `limit` (1–100, default 50) and `cursor` (`nextCursor` of the previous page).
///
/// An account key sees every call of the account, provider calls included, and needs `identity`
/// for `direction`. A device access token sees only the calls its own identity took part in;
/// naming another identity answers 403, as for bindings (the identity is the token's, so
/// nothing about another identity's calls is revealed either way).
extension CallsController {
    func history(_ request: Request, _ context: RingRelayRequestContext) async throws -> JSONResponse<CallList> {
        let scope = try context.requireScope()
        let query = try Self.historyQuery(request.uri.queryParameters, scope: scope)
        let page = try await store.listCalls(accountID: scope.accountID, query: query)
        return JSONResponse(CallList(data: page.calls.map { CallResource($0, deliveries: nil) }, nextCursor: page.next.map(Cursor.encode)))
    }

    /// Reads and checks the query parameters; every bad one is a 422 naming it, as for bindings.
    static func historyQuery(_ parameters: Parameters, scope: AccountScope) throws(RingRelayError) -> CallHistoryQuery {
        var query = CallHistoryQuery()
        query.identity = try QueryParameter.scopedIdentity(parameters, scope: scope, listing: "calls")
        if let text = parameters["direction"].map(String.init) {
            guard let direction = CallDirection(rawValue: text) else {
                throw QueryParameter.invalid("direction", "must be 'incoming' or 'outgoing'.")
            }
            guard query.identity != nil else {
                throw RingRelayError(
                    .unprocessable, code: .missingParameter, "Pass ?identity= with ?direction=: a direction is relative to an identity.")
            }
            query.direction = direction
        }
        if let text = parameters["state"].map(String.init) {
            query.states = try states(text)
        }
        if let text = parameters["since"].map(String.init) {
            query.since = try QueryParameter.time("since", text)
        }
        if let text = parameters["until"].map(String.init) {
            query.until = try QueryParameter.time("until", text)
        }
        if let since = query.since, let until = query.until, until <= since {
            throw QueryParameter.invalid("until", "must be later than 'since'.")
        }
        if let text = parameters["limit"].map(String.init) {
            query.limit = try QueryParameter.limit(text, max: CallHistoryQuery.maxLimit)
        }
        if let cursor = parameters["cursor"].map(String.init) {
            query.after = try Cursor.decodeCallPosition(cursor)
        }
        return query
    }

    /// Reads `?state=`: one call state, or several separated by commas.
    private static func states(_ text: String) throws(RingRelayError) -> Set<CallState> {
        var states = Set<CallState>()
        for name in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let state = CallState(rawValue: String(name)) else {
                throw QueryParameter.invalid(
                    "state", "must be one of \(CallState.allCases.map(\.rawValue).joined(separator: ", ")), or several separated by commas.")
            }
            states.insert(state)
        }
        return states
    }
}
