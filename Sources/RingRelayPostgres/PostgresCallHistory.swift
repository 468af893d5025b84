import PostgresNIO
import RingRelayCore
import RingRelayWire

/// The statements behind ``PostgresStore/listCalls(accountID:query:)``, the same plan as
/// SQLite's: each part (the account's calls, an identity's incoming calls, its outgoing calls,
/// or both of the latter merged, a call to oneself once) reads one range of its history index,
/// newest first, and stops after a page. With a `states` filter, which the index does not hold,
/// each part first finds where its window of ``window`` calls ends, and the page reads only
/// above the newest of those ends; when it is not full, the next page starts there.
///
/// Every statement binds the same values at the same places (`$1` the account, `$2` the
/// identity, `$3`–`$6` the `(created_at, id)` range, `$7` the states, `$8` the page size, `$9`
/// the window), so a part is a fixed text whatever the filters.
struct PostgresCallHistory: Sendable {
    /// A place in the `(created_at, id)` order of the history indexes, as stored.
    struct Bound: Comparable, Sendable {
        var millis: Int
        var id: String

        static func < (lhs: Self, rhs: Self) -> Bool {
            // Ids are ASCII and collated "C": String order is the database's order.
            (lhs.millis, lhs.id) < (rhs.millis, rhs.id)
        }
    }

    /// Most calls a page with a `states` filter looks at, per part.
    static let window = 1000

    private static let range = " AND (created_at, id) >= ($3, $4) AND (created_at, id) < ($5, $6)"
    private static let states = " AND (cardinality($7::text[]) = 0 OR state = ANY($7))"
    private static let order = " ORDER BY created_at DESC, id DESC"

    private var accountID: String
    private var identity: String?
    /// Each part: its condition, and a term only the page adds.
    private var parts: [(condition: String, pageOnly: String)]
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
        let incoming = (condition: "account_id = $1 AND callee = $2", pageOnly: "")
        let outgoing = (condition: "account_id = $1 AND caller = $2 AND source = 'native'", pageOnly: "")
        switch (history.identity, history.direction) {
        case (nil, _): parts = [(condition: "account_id = $1", pageOnly: "")]
        case (_, .incoming?): parts = [incoming]
        case (_, .outgoing?): parts = [outgoing]
        // A call to oneself comes once, as incoming.
        case (_, nil): parts = [incoming, (condition: outgoing.condition, pageOnly: " AND callee <> $2")]
        }
    }

    /// One statement per part finding where its window ends; none without a `states` filter.
    var windows: [PostgresQuery] {
        guard !stateFilter.isEmpty else { return [] }
        return parts.map { part in
            query("SELECT created_at, id FROM calls WHERE \(part.condition)\(Self.range)\(Self.order) LIMIT 1 OFFSET $9", from: since)
        }
    }

    /// The page's statement, reading only calls at or above `windowEnd` when there is one.
    func page(after windowEnd: Bound?) -> PostgresQuery {
        let selects = parts.map { part in
            "SELECT \(PostgresStore.callColumns) FROM calls WHERE \(part.condition)\(part.pageOnly)\(Self.range)\(Self.states)\(Self.order) LIMIT $8"
        }
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
