import Foundation
import Logging
import RingRelayCore
import RingRelayWire

/// Rings a callee's devices for one call: create the call → plan the ring (``RingPlan``, pure) →
/// execute it (``RingExecutor``).
///
/// Live first: a device with a live connection gets the ring over it; its push bindings (matched
/// by `deviceId`) are used only when it does not ack within the fallback window. Bindings without
/// a `deviceId`, and devices without a connection, are pushed at once.
struct Ringer: Sendable {
    /// What a ring request produced.
    struct Result: Sendable {
        /// The call, as created (or as found, for a repeated notification).
        var call: Call
        /// Its deliveries: answered, or still `pending` when the wait ran out.
        var deliveries: [Delivery]
        /// The notification was seen before: nothing rang now.
        var replayed: Bool
    }

    let store: any DataStore
    let hub: LiveHub
    /// Where devices connected to other instances are.
    let cluster: ClusterSync
    let executor: RingExecutor
    let clock: any WallClock
    let metrics: ServerMetrics
    let logger: Logger
    /// How long a provider call rings.
    let ringTimeout: Duration
    /// How long a webhook waits for first answers before it responds.
    let answerWait: Duration

    /// Rings `callee`'s devices for a provider notification, waiting for first answers up to
    /// ``answerWait``. A repeated notification rings nothing and answers from the stored deliveries.
    func ring(
        accountID: String, source: CallSource, externalID: String?, caller: String?, callee: String, content: RingContent
    ) async throws -> Result {
        let now = clock.now
        // The operator may have given the account its own ring time.
        let ringSeconds = try await cluster.limits.limits(accountID).ringTimeoutSeconds.map(TimeInterval.init) ?? ringTimeout.timeInterval
        let fresh = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: accountID, source: source, caller: caller, callee: callee,
            state: .ringing, externalID: externalID, createdAt: now, ringDeadline: now.addingTimeInterval(ringSeconds),
            updatedAt: now)
        switch try await create(fresh) {
        case .existing(let call): return try await replay(call)
        case .created(let call, let busy): return try await ring(call, calleeBusy: !busy.isEmpty, content: content, waitAtMost: answerWait)
        }
    }

    /// Creates `fresh`, or finds the call it repeats (same source and external id); a new call comes
    /// back with whether its callee is busy.
    func create(_ fresh: Call) async throws -> CallCreation {
        try await store.createCall(fresh)
    }

    /// The answer to a repeated notification: the first call and its stored deliveries.
    func replay(_ call: Call) async throws -> Result {
        logger.info(
            "repeated notification; not ringing again",
            metadata: ["account.id": .string(call.accountID), "call.id": .string(call.id), "call.source": .string(call.source.rawValue)])
        return Result(call: call, deliveries: try await store.deliveries(callID: call.id), replayed: true)
    }

    /// One identity to ring, with what its devices get.
    struct Callee: Sendable {
        /// The identity.
        var identity: String
        /// Whether it is in an accepted call (sent along with the ring).
        var busy: Bool
        /// The ring in every channel's form.
        var content: RingContent
    }

    /// Plans and rings a new call.
    ///
    /// - Parameters:
    ///   - calleeBusy: whether the callee is in an accepted call (sent along with the ring).
    ///   - content: the ring in every channel's form.
    ///   - waitAtMost: how long to wait for first answers; `nil` returns as soon as the ring started.
    /// - Returns: the call (`unreachable` when nothing could be rung) and its deliveries.
    func ring(_ call: Call, calleeBusy: Bool, content: RingContent, waitAtMost: Duration?) async throws -> Result {
        try await ring(call, callees: [Callee(identity: call.callee, busy: calleeBusy, content: content)], waitAtMost: waitAtMost).result
    }

    /// Plans and rings a new call to `callees` (one, or the identities of a ring group still to
    /// ring), each over its own devices, at once.
    ///
    /// - Returns: the call (`unreachable` when nothing could be rung for any of them), its
    ///   deliveries, and the identities that had nothing to ring.
    func ring(_ call: Call, callees: [Callee], waitAtMost: Duration?) async throws -> (result: Result, unreachable: Set<String>) {
        var logger = self.logger
        logger[metadataKey: "account.id"] = .string(call.accountID)
        logger[metadataKey: "call.id"] = .string(call.id)
        var plans: [(callee: Callee, plan: RingPlan, remote: [String: String])] = []
        var unreachable: Set<String> = []
        for callee in callees {
            let local = hub.connectedDevices(accountID: call.accountID, identity: callee.identity)
            // Devices connected to other instances ring live too, through them.
            let remote = await cluster.remoteDevices(accountID: call.accountID, identity: callee.identity).filter { !local.contains($0.key) }
            let live = remote.isEmpty ? local : local + remote.keys.sorted()
            let bindings = try await store.activeBindings(accountID: call.accountID, identity: callee.identity)
            let plan = RingPlan.make(call: call, liveDevices: live, bindings: bindings, content: callee.content.coverage, now: clock.now)
            if plan.isEmpty { unreachable.insert(callee.identity) } else { plans.append((callee, plan, remote)) }
        }
        guard !plans.isEmpty else {
            var call = call
            call.state = .unreachable
            try await store.setCallState(id: call.id, accountID: call.accountID, state: .unreachable, at: call.createdAt)
            logger.info("no reachable device", metadata: ["call.source": .string(call.source.rawValue)])
            metrics.recordFanout(0)
            metrics.recordCallOutcome(.unreachable)
            return (Result(call: call, deliveries: [], replayed: false), unreachable)
        }
        let fanout = plans.reduce(0) { $0 + $1.plan.count }
        store.recordDeliveries(plans.flatMap(\.plan.deliveries))
        metrics.recordFanout(fanout)
        logger.info(
            "ringing",
            metadata: [
                "call.source": .string(call.source.rawValue), "ring.fanout": .stringConvertible(fanout),
                "ring.live": .stringConvertible(plans.reduce(0) { $0 + $1.plan.live.count }),
            ])
        let deliveries: [Delivery]
        if plans.count == 1, let (callee, plan, remote) = plans.first {
            deliveries = await executor.execute(
                plan, call: call, callee: callee.identity, content: callee.content, calleeBusy: callee.busy, remote: remote, logger: logger,
                waitAtMost: waitAtMost ?? .zero)
        } else {
            let executor = self.executor
            let logger = logger
            let planned = plans
            deliveries = await withTaskGroup(of: (Int, [Delivery]).self) { group in
                for (index, (callee, plan, remote)) in planned.enumerated() {
                    group.addTask {
                        let answered = await executor.execute(
                            plan, call: call, callee: callee.identity, content: callee.content, calleeBusy: callee.busy, remote: remote,
                            logger: logger, waitAtMost: waitAtMost ?? .zero)
                        return (index, answered)
                    }
                }
                var byPlan: [[Delivery]] = Array(repeating: [], count: plans.count)
                for await (index, answered) in group { byPlan[index] = answered }
                return byPlan.flatMap { $0 }
            }
        }
        if let first = deliveries.compactMap(\.completedAt).min() {
            metrics.recordFirstPush(first.timeIntervalSince(call.createdAt))
        }
        // The answer reports these records: they are on disk before it goes out (a crash after
        // a 201 must not show the call without them). Under load one write serves many rings.
        try await store.flushDeliveries()
        return (Result(call: call, deliveries: deliveries, replayed: false), unreachable)
    }
}
