import Foundation
import Logging
import NIOCore
import NIOPosix
import RingRelayCore
import Synchronization
import RingRelayWire

/// Executes ring plans: rings live connections first, then pushes, one task per delivery, and
/// records every answer.
///
/// One slow or failing device never delays the others. ``execute(_:call:callee:content:calleeBusy:remote:logger:waitAtMost:)``
/// returns when every delivery has an answer or after `waitAtMost`, whichever comes first; tasks
/// still running go on in the background (retrying within the ring deadline) and are tracked, so a
/// graceful shutdown can wait for them (``drain()``, from ``RingDrainService``).
///
/// A live ring waits for the device's ack up to ``liveFallback``; without it the delivery is
/// `unacknowledged` and, if the call still rings, the device's fallback bindings are pushed, once,
/// in the same task.
final class RingExecutor: Sendable {
    private let store: any DataStore
    private let hub: LiveHub
    /// Rings devices connected to other instances through them.
    private let cluster: ClusterSync
    private let pusher: BindingPusher
    private let clock: any WallClock
    private let metrics: ServerMetrics
    /// How long a live ring waits for its ack before the device's push bindings are used too.
    let liveFallback: Duration
    /// Deliveries running, and shutdowns waiting for them to end.
    private let inFlight = Mutex(InFlight())

    private struct InFlight: ~Copyable {
        var count = 0
        var drains: [CheckedContinuation<Void, Never>] = []
    }

    /// What every delivery of one ring shares.
    private struct Ring: Sendable {
        var call: Call
        /// The identity rung (the call's callee, or one identity of its ring group).
        var callee: String
        var content: RingContent
        var calleeBusy: Bool
        /// The connected devices held by other instances: device id → instance.
        var remote: [String: String]
        /// Bindings of connected devices, by device id: pushed only when the live ring goes unacknowledged.
        var fallbacks: [String: [Binding]]
        var logger: Logger
    }

    /// One delivery to start.
    private enum Step: Sendable {
        case live(RingPlan.LiveRing)
        case push(RingPlan.Push)
    }

    init(
        store: any DataStore, hub: LiveHub, cluster: ClusterSync, pusher: BindingPusher, clock: any WallClock, metrics: ServerMetrics,
        liveFallback: Duration
    ) {
        self.store = store
        self.hub = hub
        self.cluster = cluster
        self.pusher = pusher
        self.clock = clock
        self.metrics = metrics
        self.liveFallback = liveFallback
    }

    /// Starts every delivery of `plan`, which rings `callee`'s devices, and waits for their answers
    /// up to `waitAtMost`.
    ///
    /// - Parameter remote: the plan's connected devices that other instances hold (device id →
    ///   instance): their live rings go through those instances.
    /// - Returns: the plan's deliveries in plan order, answered or still `pending` when the wait ran out.
    func execute(
        _ plan: RingPlan, call: Call, callee: String, content: RingContent, calleeBusy: Bool, remote: [String: String] = [:], logger: Logger,
        waitAtMost: Duration
    ) async -> [Delivery] {
        guard !plan.isEmpty else { return [] }
        let ring = Ring(
            call: call, callee: callee, content: content, calleeBusy: calleeBusy, remote: remote, fallbacks: plan.fallbacks, logger: logger)
        let (answers, continuation) = AsyncStream.makeStream(of: Delivery.self)
        for live in plan.live { start(.live(live), of: ring, answering: continuation) }
        startPushes(plan.pushes, of: ring, answering: continuation)
        let expected = plan.count
        var answered: [String: Delivery] = [:]
        if waitAtMost > .zero {
            // Read answers until all are in or the wait is over. The wait is a timer on an event
            // loop that ends the stream: a Task.sleep here cost a dispatch timer (and a wake-up of
            // dispatch's manager thread) per ring.
            let timeout = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(waitAtMost)) { continuation.finish() }
            for await delivery in answers {
                answered[delivery.id] = delivery
                if answered.count == expected { break }
            }
            timeout.cancel()
        } else if expected >= Self.yieldingRing {
            // The deliveries' tasks are queued behind this one on its event loop: let them start
            // (each up to its first wait, a push handed to its connection) before the caller goes
            // on to write and encode its answer, which for a 10,000-device ring held the loop for
            // ~300 ms while no push had left.
            await Task.yield()
        }
        continuation.finish()
        var deliveries: [Delivery] = []
        deliveries.reserveCapacity(expected)
        for live in plan.live { deliveries.append(answered[live.delivery.id] ?? live.delivery) }
        for push in plan.pushes { deliveries.append(answered[push.delivery.id] ?? push.delivery) }
        return deliveries
    }

    /// From this many deliveries, a ring that does not wait for answers lets them start before its
    /// caller goes on. The caller's writing and encoding of its answer costs ~30 µs a delivery; the
    /// yield costs a turn of the event loop, ~10 % of a one-delivery call's CPU (`bench live`).
    static let yieldingRing = 32

    /// Waits until no delivery is in flight (for a graceful shutdown).
    func drain() async {
        await withCheckedContinuation { (drained: CheckedContinuation<Void, Never>) in
            let idle = inFlight.withLock { state in
                if state.count > 0 { state.drains.append(drained) }
                return state.count == 0
            }
            if idle { drained.resume() }
        }
    }

    /// How many deliveries are still in flight.
    var inFlightCount: Int { inFlight.withLock { $0.count } }

    /// Starts a ring's pushes. A task starts on the event loop that creates it, and runs there up
    /// to its first wait (its push handed to the connection), so a large ring's pushes are started
    /// from every event loop, a share each, rather than all from the caller's.
    private func startPushes(_ pushes: [RingPlan.Push], of ring: Ring, answering continuation: AsyncStream<Delivery>.Continuation) {
        let others = pushes.count >= Self.spreadRing ? Self.loops.filter { !$0.inEventLoop } : []
        guard !others.isEmpty else {
            for push in pushes { start(.push(push), of: ring, answering: continuation) }
            return
        }
        let share = (pushes.count + others.count) / (others.count + 1)
        for (index, loop) in others.enumerated() {
            let part = pushes[min(pushes.count, (index + 1) * share)..<min(pushes.count, (index + 2) * share)]
            guard !part.isEmpty else { continue }
            // Counted now, so a drain that starts before the loop gets to them still waits for them.
            inFlight.withLock { $0.count += part.count }
            loop.execute {
                for push in part { self.start(.push(push), of: ring, answering: continuation, precounted: true) }
            }
        }
        for push in pushes.prefix(share) { start(.push(push), of: ring, answering: continuation) }
    }

    /// From this many pushes, a ring's pushes are started from every event loop (``startPushes(_:of:answering:)``).
    static let spreadRing = 64

    /// The event loops tasks run on (see `EventLoopGlobalExecutor`).
    private static let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())

    /// Runs one delivery as a counted task: rings, records the answer, reports it.
    ///
    /// - Parameter precounted: the caller has counted it in flight already.
    private func start(_ step: Step, of ring: Ring, answering continuation: AsyncStream<Delivery>.Continuation, precounted: Bool = false) {
        counted(precounted: precounted) {
            let answered: Delivery
            switch step {
            case .live(let live): answered = await self.ringLive(live, of: ring)
            case .push(let push): answered = await self.push(push, of: ring)
            }
            self.store.recordDeliveries([answered])
            continuation.yield(answered)
        }
    }

    /// Runs `work` as a task a drain waits for. Counted before the task exists, so a drain never
    /// misses it; the lock is held only for the count, never while a task is created or runs.
    private func counted(precounted: Bool = false, _ work: @escaping @Sendable () async -> Void) {
        if !precounted { inFlight.withLock { $0.count += 1 } }
        Task {
            await work()
            self.finished()
        }
    }

    /// One delivery ended; the last one out releases the drains waiting.
    private func finished() {
        let drains = inFlight.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count -= 1
            guard state.count == 0 else { return [] }
            defer { state.drains = [] }
            return state.drains
        }
        for drained in drains { drained.resume() }
    }

    /// Sends the ring over the device's connection and waits for the ack; without one in time,
    /// the device's push bindings are rung too (once, and only while the call still rings).
    private func ringLive(_ live: RingPlan.LiveRing, of ring: Ring) async -> Delivery {
        let call = ring.call
        let key = DeviceKey(accountID: call.accountID, identity: ring.callee, deviceID: live.deviceID)
        let start = ContinuousClock.now
        var answered = live.delivery
        answered.attempts = 1
        switch await ringAndAwaitAck(live.deviceID, key: key, of: ring) {
        case .acknowledged:
            answered.outcome = PushDisposition.delivered.metricName
            answered.latencyMs = ((ContinuousClock.now - start).timeInterval * 1_000_000).rounded() / 1000
            answered.completedAt = clock.now
            return answered
        case .ringOver:
            // The call stopped ringing here before this ring's task ran: nothing was sent, and
            // nothing falls back to push.
            answered.outcome = PushDisposition.drop.metricName
            answered.reason = "ring_ended"
            answered.completedAt = clock.now
            return answered
        case .unacknowledged(let reason):
            answered.outcome = "unacknowledged"
            answered.reason = reason
            answered.completedAt = clock.now
        }
        let bindings = ring.fallbacks[live.deviceID] ?? []
        guard !bindings.isEmpty else { return answered }
        do {
            guard try await store.call(id: call.id, accountID: call.accountID)?.isRinging(ring.callee) == true else { return answered }
            let pushes = RingPlan.pushes(to: bindings, call: call, now: clock.now)
            store.recordDeliveries(pushes.map(\.delivery))
            metrics.recordLiveFallback(pushes.count)
            ring.logger.info("live ring unacknowledged; pushing", metadata: ["device.id": .string(live.deviceID)])
            await withTaskGroup(of: Void.self) { group in
                for push in pushes {
                    group.addTask { self.store.recordDeliveries([await self.push(push, of: ring)]) }
                }
            }
        } catch {
            ring.logger.error(
                "could not fall back to push", metadata: ["device.id": .string(live.deviceID), "error.cause": .string("\(error)")])
        }
        return answered
    }

    /// How a live ring ended.
    private enum LiveRingResult {
        case acknowledged
        /// Not acknowledged in time, or not sent; the reason is the delivery's (``UnacknowledgedReason``).
        case unacknowledged(String)
        /// Not sent: the call no longer rings on the device.
        case ringOver
    }

    /// Why a live ring went unacknowledged, as its delivery record says.
    enum UnacknowledgedReason {
        /// Sent, and no acknowledgement came within the window.
        static let noAck = "no_ack"
        /// The device's connection had ended when the ring was to be sent.
        static let notConnected = RemoteRing.notConnected
        /// Relayed to the instance holding the device, and no word came back within the window
        /// (the relay or the acknowledgement was late, or the device did not answer).
        static let relayUnconfirmed = "relay_unconfirmed"
        /// Too large to relay to the instance holding the device.
        static let relayTooLarge = "relay_too_large"
    }

    /// Rings one connected device, here or through the instance holding it, and waits for its ack.
    private func ringAndAwaitAck(_ deviceID: String, key: DeviceKey, of ring: Ring) async -> LiveRingResult {
        let call = ring.call
        let sealed = ring.content.sealedLive[deviceID]
        if let instance = ring.remote[deviceID] {
            switch await cluster.ringRemote(
                LiveDeviceAddress(accountID: key.accountID, identity: key.identity, deviceID: key.deviceID), on: instance, call: call,
                event: ring.content.liveEvent, calleeBusy: ring.calleeBusy, payload: ring.content.livePayload, sealed: sealed, within: liveFallback)
            {
            case .acknowledged: return .acknowledged
            case .refused(RemoteRing.ringEnded): return .ringOver
            case .refused(let reason): return .unacknowledged(reason)
            case .unconfirmed: return .unacknowledged(UnacknowledgedReason.relayUnconfirmed)
            case .tooLarge: return .unacknowledged(UnacknowledgedReason.relayTooLarge)
            }
        }
        switch hub.ring(
            ring.content.liveEvent, call: call, to: key, calleeBusy: ring.calleeBusy, provider: call.source == .native ? nil : call.source,
            rawPayload: ring.content.livePayload, sealed: sealed)
        {
        case .sent(let eventID):
            return await hub.awaitAck(eventID, within: liveFallback) ? .acknowledged : .unacknowledged(UnacknowledgedReason.noAck)
        case .notConnected: return .unacknowledged(UnacknowledgedReason.notConnected)
        case .ringOver: return .ringOver
        }
    }

    /// Sends pushes that are not part of a ring (missed-call notices), each as a counted task
    /// like a ring's deliveries, and records their answers; returns at once.
    ///
    /// - Parameters:
    ///   - pushes: the pushes, each with its payload.
    ///   - deadline: no attempt starts after this.
    func send(_ pushes: [(push: RingPlan.Push, payload: BindingPusher.Payload)], deadline: Date, logger: Logger) {
        guard !pushes.isEmpty else { return }
        store.recordDeliveries(pushes.map(\.push.delivery))
        for (push, payload) in pushes {
            counted { self.store.recordDeliveries([await self.push(push, payload: payload, deadline: deadline, logger: logger)]) }
        }
    }

    /// Pushes one of a ring's deliveries with the ring's content for its binding.
    private func push(_ push: RingPlan.Push, of ring: Ring) async -> Delivery {
        guard let payload = ring.content.payload(for: push.binding) else { return push.delivery }
        return await self.push(push, payload: payload, deadline: ring.call.ringDeadline, logger: ring.logger)
    }

    /// Pushes to one binding through ``BindingPusher``; every failure becomes the delivery's outcome.
    private func push(_ push: RingPlan.Push, payload: BindingPusher.Payload, deadline: Date, logger: Logger) async -> Delivery {
        let binding = push.binding
        do {
            let result = try await pusher.push(payload, to: binding, deadline: deadline)
            return push.delivery.completed(with: result.outcome, at: clock.now)
        } catch let error as RingRelayError {
            // No credential for the channel: a configuration problem of this account.
            return push.delivery.completed(
                with: PushOutcome(disposition: .fixConfiguration, status: nil, reason: error.code, providerID: nil, latency: .zero, attempts: 0),
                at: clock.now)
        } catch {
            logger.error("delivery failed", metadata: ["binding.id": .string(binding.id), "error.cause": .string("\(error)")])
            return push.delivery.completed(
                with: PushOutcome(disposition: .drop, status: nil, reason: "InternalError", providerID: nil, latency: .zero, attempts: 0),
                at: clock.now)
        }
    }
}
