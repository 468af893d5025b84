/// The calls that ended lately and why, so a late sighting (a push after the live connection said
/// the call was cancelled, the same push twice) does not ring again.
struct RecentCalls: Sendable {
    private var reasons: [CallKey: CallEndReason?] = [:]
    private var order: [CallKey] = []
    private let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    /// The end reason of a remembered call: `.some(nil)` when it was ended on this device.
    subscript(key: CallKey) -> CallEndReason?? { reasons[key] }

    /// Remembers that `key` ended, forgetting the oldest call beyond the capacity.
    mutating func remember(_ key: CallKey, reason: CallEndReason?) {
        if reasons.updateValue(reason, forKey: key) == nil {
            order.append(key)
        }
        if order.count > capacity {
            reasons[order.removeFirst()] = nil
        }
    }
}
