import Foundation
import RingRelayWire

/// The filters of ``RingRelayClient/recentCalls(limit:cursor:direction:states:since:until:)``, as
/// `GET /v1/calls` takes them.
struct CallHistoryQuery: Sendable, Hashable {
    var limit: Int?
    var cursor: String?
    var direction: CallDirection?
    var states: Set<CallRecordState> = []
    var since: Date?
    var until: Date?

    /// The query string's items, times in UTC with milliseconds (no `+` to encode).
    var queryItems: [URLQueryItem] {
        var items: [URLQueryItem] = []
        let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        if let direction { items.append(URLQueryItem(name: "direction", value: direction.rawValue)) }
        if !states.isEmpty { items.append(URLQueryItem(name: "state", value: states.map(\.rawValue).sorted().joined(separator: ","))) }
        if let since { items.append(URLQueryItem(name: "since", value: since.formatted(time))) }
        if let until { items.append(URLQueryItem(name: "until", value: until.formatted(time))) }
        if let limit { items.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let cursor { items.append(URLQueryItem(name: "cursor", value: cursor)) }
        return items
    }
}
