import Foundation
import RingRelayWire

/// Which side of a call an identity was on.
public enum CallDirection: String, Sendable, Hashable, CaseIterable {
    /// The identity was rung: it is the callee (of a native or a provider call).
    case incoming
    /// The identity placed the call: it is the caller of a native call. Provider calls have no
    /// caller among the account's identities, so they are never outgoing.
    case outgoing
}

/// A place in the call history: the call a page ended with. The next page continues with the
/// calls that come after it, newest first: created earlier, or in the same millisecond with a
/// smaller id.
public struct CallHistoryPosition: Sendable, Hashable {
    /// When the call was created, as stored (whole milliseconds).
    public var createdAt: Date
    /// The call's id.
    public var id: String

    /// Creates a position.
    public init(createdAt: Date, id: String) {
        self.createdAt = createdAt
        self.id = id
    }

    /// The position just after `call`.
    public init(after call: Call) {
        self.init(createdAt: call.createdAt, id: call.id)
    }
}

/// A place in the `(created_at, id)` order of the stores' history indexes, as stored (whole
/// milliseconds); the stores compare the ends of their parts' windows with it.
package struct CallHistoryBound: Comparable, Sendable {
    package var millis: Int
    package var id: String

    package init(millis: Int, id: String) {
        self.millis = millis
        self.id = id
    }

    package static func < (lhs: Self, rhs: Self) -> Bool {
        // Call ids are ASCII, where String order is both databases' byte ("C") order.
        (lhs.millis, lhs.id) < (rhs.millis, rhs.id)
    }
}

/// One page of the call history.
public struct CallHistoryPage: Sendable, Hashable {
    /// The calls, newest first.
    public var calls: [Call]
    /// Where the next page starts, or `nil` on the last page. Usually after the page's last call;
    /// when a filter the index does not hold (``CallHistoryQuery/states``) skipped many calls, after
    /// the last call the store looked at, so a page can hold fewer calls than asked, even none,
    /// while more follow.
    public var next: CallHistoryPosition?

    /// Creates a page.
    public init(calls: [Call], next: CallHistoryPosition?) {
        self.calls = calls
        self.next = next
    }
}

/// Filters and position for listing an account's calls, newest first (`created_at` descending,
/// then id descending, which keeps the order stable within a millisecond).
public struct CallHistoryQuery: Sendable, Hashable {
    /// Only calls this identity took part in: as the callee, or as the caller of a native call.
    public var identity: String?
    /// Only calls on this side of ``identity``; ignored without ``identity``.
    public var direction: CallDirection?
    /// Only calls in one of these states; empty means every state.
    public var states: Set<CallState>
    /// Only calls created at or after this time.
    public var since: Date?
    /// Only calls created before this time.
    public var until: Date?
    /// Page size, 1–``maxLimit``.
    public var limit: Int
    /// Continue after this call (keyset pagination).
    public var after: CallHistoryPosition?

    /// Default page size.
    public static let defaultLimit = 50
    /// Largest page size. A page is one index range read, but filters the index does not hold
    /// (`state`) are checked row by row; a small page bounds that work.
    public static let maxLimit = 100

    /// Creates a query.
    public init(
        identity: String? = nil, direction: CallDirection? = nil, states: Set<CallState> = [], since: Date? = nil, until: Date? = nil,
        limit: Int = defaultLimit, after: CallHistoryPosition? = nil
    ) {
        self.identity = identity
        self.direction = direction
        self.states = states
        self.since = since
        self.until = until
        self.limit = limit
        self.after = after
    }
}

extension Call {
    /// How long the conversation lasted, from the answer to the hang-up: only for a call that was
    /// answered and has ended; never negative.
    public var talkTime: TimeInterval? {
        guard state == .ended, let answeredAt, let endedAt else { return nil }
        return max(0, endedAt.timeIntervalSince(answeredAt))
    }
}
