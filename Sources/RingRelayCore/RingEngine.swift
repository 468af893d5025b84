import Foundation
import Synchronization

/// One device to ring: a live connection, or a push binding.
public enum RingTarget: Sendable, Hashable {
    /// A device with a live connection, by device id.
    case live(deviceID: String)
    /// A push binding.
    case binding(Binding)
}

/// Rings one target for a call and reports the answer. Implemented by the server (live hub, push
/// clients, store, fault registry); the engine itself does no I/O.
public protocol RingTransport: Sendable {
    /// The channel and kind a target will be rung on.
    func route(_ target: RingTarget) -> (channel: PushChannel, kind: String)
    /// Rings one target and returns the delivery with its outcome. Failures are outcomes, never
    /// thrown.
    func deliver(_ delivery: Delivery, to target: RingTarget, call: Call) async -> Delivery
}

/// Rings every device of a callee at once.
///
/// One task per binding, so one slow or failing device never delays the others. ``ring(_:bindings:transport:waitAtMost:)``
/// returns when every delivery has an answer or after `waitAtMost`, whichever comes first; the
/// tasks still running go on in the background (retrying within the ring deadline) and are
/// tracked so a shutdown can wait for them.
public final class RingEngine: Sendable {
    private let clock: any WallClock
    private let inFlight = Mutex<[UInt64: Task<Void, Never>]>([:])
    /// Keys of ``inFlight``: a counter, where `UUID()` would read the system's randomness each time.
    private let lastKey = Atomic<UInt64>(0)

    /// Creates an engine.
    public init(clock: any WallClock) {
        self.clock = clock
    }

    /// Plans one delivery per target (active bindings only).
    public func plan(_ call: Call, targets: [RingTarget], transport: any RingTransport) -> [(Delivery, RingTarget)] {
        targets.compactMap { target in
            let route = transport.route(target)
            let delivery: Delivery
            switch target {
            case .binding(let binding):
                guard binding.status == .active else { return nil }
                delivery = Delivery(
                    id: ResourceID.make(ResourceID.delivery, at: clock.now), callID: call.id, bindingID: binding.id,
                    deviceID: binding.deviceID, channel: route.channel, kind: route.kind, createdAt: clock.now)
            case .live(let deviceID):
                delivery = Delivery(
                    id: ResourceID.make(ResourceID.delivery, at: clock.now), callID: call.id, bindingID: nil, deviceID: deviceID,
                    channel: route.channel, kind: route.kind, createdAt: clock.now)
            }
            return (delivery, target)
        }
    }

    /// Sends the planned deliveries concurrently.
    ///
    /// - Returns: every delivery, answered or still `pending` when `waitAtMost` ran out.
    public func ring(_ call: Call, planned: [(Delivery, RingTarget)], transport: any RingTransport, waitAtMost: Duration) async -> [Delivery] {
        guard !planned.isEmpty else { return [] }
        let (answers, continuation) = AsyncStream.makeStream(of: Delivery.self)
        for (delivery, target) in planned {
            let key = lastKey.add(1, ordering: .relaxed).newValue
            let task = Task {
                let answered = await transport.deliver(delivery, to: target, call: call)
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

    /// Runs `work` as a tracked background task, so a shutdown waits for it too (fallback pushes
    /// after an unacknowledged live ring, for example).
    public func track(_ work: @escaping @Sendable () async -> Void) {
        let key = lastKey.add(1, ordering: .relaxed).newValue
        inFlight.withLock { tasks in
            tasks[key] = Task {
                await work()
                _ = self.inFlight.withLock { $0.removeValue(forKey: key) }
            }
        }
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
