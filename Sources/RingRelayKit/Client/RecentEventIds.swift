/// The ids of the events handled lately, to drop the ones the server sends again after a
/// reconnect (it re-sends every event not acknowledged in time).
struct RecentEventIds: Sendable {
    private var ids: Set<String> = []
    private var order: [String] = []
    private let capacity: Int

    init(capacity: Int = 512) { self.capacity = max(1, capacity) }

    /// Records `id`. Returns `false` when it was seen already.
    mutating func insert(_ id: String) -> Bool {
        guard ids.insert(id).inserted else { return false }
        order.append(id)
        if order.count > capacity { ids.remove(order.removeFirst()) }
        return true
    }
}
