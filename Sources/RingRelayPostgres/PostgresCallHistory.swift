import Foundation
import PostgresNIO
import RingRelayCore
import RingRelayWire

/// The statements behind ``PostgresStore/listCalls(accountID:query:)``, the same plan as
/// SQLite's: each part (the account's calls, an identity's incoming calls — as the callee, or as a
/// later identity of a ring group, from `call_members` — its outgoing calls, or all merged, a call
/// to oneself once) reads one range of its history index,
/// newest first, and stops after a page. With a `states` filter, which the index does not hold,
/// each part first finds where its window of ``window`` calls ends, and the page reads only
/// above the newest of those ends; when it is not full, the next page starts there.
///
/// Every statement binds the same values at the same places (`$1` the account, `$2` the
/// identity, `$3`–`$6` the `(created_at, id)` range, `$7` the states, `$8` the page size, `$9`
/// the window), so a part is a fixed text whatever the filters.
struct PostgresCallHistory: Sendable {
    typealias Bound = CallHistoryBound

    /// Most calls a page with a `states` filter looks at, per part.
    static let window = 1000

    private static let range = " AND (created_at, id) >= ($3, $4) AND (created_at, id) < ($5, $6)"
    private static let states = " AND (cardinality($7::text[]) = 0 OR state = ANY($7))"
    private static let order = " ORDER BY created_at DESC, id DESC"

    /// One part: the statement finding where its window ends, and its page.
    private struct Part: Sendable {
        var window: String
        var page: String

        /// A range of a history index of the calls table.
        static func calls(_ condition: String, pageOnly: String = "") -> Part {
            Part(
                window: "SELECT created_at, id FROM calls WHERE \(condition)\(range)\(order) LIMIT 1 OFFSET $9",
                page: "SELECT \(PostgresStore.callColumns) FROM calls WHERE \(condition)\(pageOnly)\(range)\(states)\(order) LIMIT $8")
        }

        /// The ring groups that rang the identity after their first identity (who is in the
        /// callee index already), from call_members to their calls.
        static let laterGroupMembers: Part = {
            let condition = "m.account_id = $1 AND m.identity = $2 AND NOT m.first"
            let range = " AND (m.created_at, m.call_id) >= ($3, $4) AND (m.created_at, m.call_id) < ($5, $6)"
            let order = " ORDER BY m.created_at DESC, m.call_id DESC"
            // The order columns come from the index (equal to the call's own), so the merge of the
            // parts reads this one in order too instead of sorting it.
            let columns = PostgresStore.callColumns.split(separator: ",").map { column in
                switch column.trimmingCharacters(in: .whitespacesAndNewlines) {
                case "id": "m.call_id AS id"
                case "created_at": "m.created_at AS created_at"
                case let name: "c." + name
                }
            }
            return Part(
                window: "SELECT m.created_at, m.call_id AS id FROM call_members AS m WHERE \(condition)\(range)\(order) LIMIT 1 OFFSET $9",
                page: "SELECT \(columns.joined(separator: ", ")) FROM call_members AS m JOIN calls AS c ON c.id = m.call_id WHERE \(condition)"
                    + "\(range) AND (cardinality($7::text[]) = 0 OR c.state = ANY($7))\(order) LIMIT $8")
        }()
    }

    private var accountID: String
    private var identity: String?
    private var parts: [Part]
    private var since: Bound
    private var upper: Bound
    private var stateFilter: [String]
    private var limit: Int

    init(accountID: String, query history: CallHistoryQuery) {
        self.accountID = accountID
        identity = history.identity
        limit = history.limit
        stateFilter = history.states.map(\.rawValue).sorted()
        // The tighter of `until` and the cursor; `(until, '')` comes before every call of that millisecond.
        upper = Bound(millis: Int.max, id: "")
        if let until = history.until { upper = Bound(millis: until.millis, id: "") }
        if let after = history.after { upper = min(upper, Bound(millis: after.createdAt.millis, id: after.id)) }
        since = Bound(millis: history.since?.millis ?? Int.min, id: "")
        let incoming = [Part.calls("account_id = $1 AND callee = $2"), Part.laterGroupMembers]
        let outgoing = "account_id = $1 AND caller = $2 AND source = 'native'"
        switch (history.identity, history.direction) {
        case (nil, _): parts = [Part.calls("account_id = $1")]
        case (_, .incoming?): parts = incoming
        case (_, .outgoing?): parts = [Part.calls(outgoing)]
        // A call to oneself comes once, as incoming.
        case (_, nil): parts = incoming + [Part.calls(outgoing, pageOnly: " AND callee <> $2")]
        }
    }

    /// One statement per part finding where its window ends; none without a `states` filter.
    var windows: [PostgresQuery] {
        guard !stateFilter.isEmpty else { return [] }
        return parts.map { query($0.window, from: since) }
    }

    /// The page's statement, reading only calls at or above `windowEnd` when there is one.
    func page(after windowEnd: Bound?) -> PostgresQuery {
        let selects = parts.map(\.page)
        let sql = selects.count == 1 ? selects[0] : selects.map { "(\($0))" }.joined(separator: " UNION ALL ") + Self.order + " LIMIT $8"
        return query(sql, from: max(since, windowEnd ?? since))
    }

    private func query(_ sql: String, from lower: Bound) -> PostgresQuery {
        var binds = PostgresBindings(capacity: 9)
        binds.append(accountID)
        binds.append(identity ?? "")
        binds.append(lower.millis)
        binds.append(lower.id)
        binds.append(upper.millis)
        binds.append(upper.id)
        binds.append(stateFilter)
        binds.append(limit + 1)
        binds.append(Self.window - 1)
        return PostgresQuery(unsafeSQL: sql, binds: binds)
    }
}
