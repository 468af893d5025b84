import Foundation
import Synchronization

/// Sends one push to one binding for a call and reports the answer. Implemented by the server
/// (push clients, store, fault registry); the engine itself does no I/O.
public protocol RingTransport: Sendable {
    /// The channel and kind a binding will be rung on.
    func route(_ binding: Binding) -> (channel: PushChannel, kind: String)
    /// Pushes to one binding and returns the delivery with its outcome. Push failures are
    /// outcomes, never thrown.
    func deliver(_ delivery: Delivery, to binding: Binding, call: Call) async -> Delivery
}

/// Rings every device of a callee at once.
///
/// One task per binding, so one slow or failing device never delays the others. ``ring(_:bindings:transport:waitAtMost:)``
/// returns when every delivery has an answer or after `waitAtMost`, whichever comes first; the
/// tasks still running go on in the background (retrying within the ring deadline) and are
/// tracked so a shutdown can wait for them.
public final class RingEngine: Sendable {
    private let clock: any WallClock
    private let inFlight = Mutex<[UUID: Task<Void, Never>]>([:])

    /// Creates an engine.
    public init(clock: any WallClock) {
        self.clock = clock
    }

    /// Plans one delivery per binding (active ones only).
    public func plan(_ call: Call, bindings: [Binding], transport: any RingTransport) -> [(Delivery, Binding)] {
        bindings.filter { $0.status == .active }.map { binding in
            let route = transport.route(binding)
            let delivery = Delivery(
                id: ResourceID.make(ResourceID.delivery, at: call.createdAt), callID: call.id, bindingID: binding.id,
                channel: route.channel, kind: route.kind, createdAt: clock.now)
            return (delivery, binding)
        }
    }

    /// Sends the planned deliveries concurrently.
    ///
    /// - Returns: every delivery, answered or still `pending` when `waitAtMost` ran out.
    public func ring(_ call: Call, planned: [(Delivery, Binding)], transport: any RingTransport, waitAtMost: Duration) async -> [Delivery] {
        guard !planned.isEmpty else { return [] }
        let (answers, continuation) = AsyncStream.makeStream(of: Delivery.self)
        for (delivery, binding) in planned {
            let key = UUID()
            let task = Task {
                let answered = await transport.deliver(delivery, to: binding, call: call)
                continuation.yield(answered)
                _ = self.inFlight.withLock { $0.removeValue(forKey: key) }
            }
            inFlight.withLock { $0[key] = task }
        }
        let collected = AnswerBox()
        // Read answers until all are in or the wait is over, whichever comes first.
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await delivery in answers {
                    if collected.add(delivery) == planned.count { break }
                }
            }
            group.addTask {
                try? await Task.sleep(until: ContinuousClock.now + waitAtMost, clock: .continuous)
            }
            await group.next()
            group.cancelAll()
        }
        continuation.finish()
        let answered = collected.byID
        return planned.map { answered[$0.0.id] ?? $0.0 }
    }

    /// Waits for every delivery still in flight (for a graceful shutdown).
    public func drain() async {
        let tasks = inFlight.withLock { Array($0.values) }
        for task in tasks { await task.value }
    }

    /// How many deliveries are still in flight.
    public var inFlightCount: Int { inFlight.withLock { $0.count } }
}

/// Answers collected while waiting, shared between the reader and the caller.
private final class AnswerBox: Sendable {
    private let answers = Mutex<[String: Delivery]>([:])

    /// Adds an answer; returns how many there are now.
    func add(_ delivery: Delivery) -> Int {
        answers.withLock {
            $0[delivery.id] = delivery
            return $0.count
        }
    }

    var byID: [String: Delivery] { answers.withLock { $0 } }
}
