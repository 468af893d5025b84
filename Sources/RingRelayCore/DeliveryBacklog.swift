import Synchronization

/// Delivery records waiting to be written, the latest record of each delivery id in arrival order.
///
/// Both stores write delivery records behind (see ``CallStore/recordDeliveries(_:)``): this is
/// the records of this process not yet written, never a copy of what the database holds.
///
/// ``add(_:)`` answers whether the caller must schedule a write: the first record after a drain
/// does, the rest ride along with it.
package final class DeliveryBacklog: Sendable {
    private struct State {
        var order: [String] = []
        var latest: [String: Delivery] = [:]
        var scheduled = false
    }

    private let state = Mutex(State())

    package init() {}

    /// Adds records; returns `true` when no write is scheduled yet (the caller schedules one).
    package func add(_ deliveries: [Delivery]) -> Bool {
        state.withLock { state in
            for delivery in deliveries where state.latest.updateValue(delivery, forKey: delivery.id) == nil {
                state.order.append(delivery.id)
            }
            guard !state.scheduled, !state.order.isEmpty else { return false }
            state.scheduled = true
            return true
        }
    }

    /// The scheduled write could not run: the next ``add(_:)`` schedules another.
    package func endSchedule() {
        state.withLock { $0.scheduled = false }
    }

    /// Puts back records a write could not store (the database failed, not refused them), ahead of
    /// what arrived meanwhile; a newer record of the same delivery that arrived meanwhile is kept.
    package func restore(_ deliveries: some Collection<Delivery>) {
        guard !deliveries.isEmpty else { return }
        state.withLock { state in
            var restored: [String] = []
            for delivery in deliveries where state.latest[delivery.id] == nil {
                state.latest[delivery.id] = delivery
                restored.append(delivery.id)
            }
            state.order.insert(contentsOf: restored, at: 0)
        }
    }

    /// Takes every waiting record, oldest first.
    ///
    /// - Parameter endingSchedule: the scheduled write is draining: the next ``add(_:)``
    ///   schedules a new one. Other drains (a flush, a read) leave the scheduled write to come,
    ///   so records keep riding on it instead of each drain causing another.
    package func drain(endingSchedule: Bool) -> [Delivery] {
        state.withLock { state in
            let drained = state.order.compactMap { state.latest[$0] }
            state.order.removeAll(keepingCapacity: true)
            state.latest.removeAll(keepingCapacity: true)
            if endingSchedule { state.scheduled = false }
            return drained
        }
    }
}
