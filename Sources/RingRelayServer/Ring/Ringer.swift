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
        let fresh = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: accountID, source: source, caller: caller, callee: callee,
            state: .ringing, externalID: externalID, createdAt: now, ringDeadline: now.addingTimeInterval(ringTimeout.timeInterval),
            updatedAt: now)
        switch try await create(fresh) {
        case .existing(let call): return try await replay(call)
        case .created(let call, let busy): return try await ring(call, calleeBusy: busy, content: content, waitAtMost: answerWait)
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

    /// Plans and rings a new call.
    ///
    /// - Parameters:
    ///   - calleeBusy: whether the callee is in an accepted call (sent along with the ring).
    ///   - content: the ring in every channel's form.
    ///   - waitAtMost: how long to wait for first answers; `nil` returns as soon as the ring started.
    /// - Returns: the call (`unreachable` when nothing could be rung) and its deliveries.
    func ring(_ call: Call, calleeBusy: Bool, content: RingContent, waitAtMost: Duration?) async throws -> Result {
        var logger = self.logger
        logger[metadataKey: "account.id"] = .string(call.accountID)
        logger[metadataKey: "call.id"] = .string(call.id)
        let live = hub.connectedDevices(accountID: call.accountID, identity: call.callee)
        let bindings = try await store.activeBindings(accountID: call.accountID, identity: call.callee)
        let plan = RingPlan.make(call: call, liveDevices: live, bindings: bindings, content: content.coverage, now: clock.now)
        guard !plan.isEmpty else {
            var call = call
            call.state = .unreachable
            try await store.setCallState(id: call.id, accountID: call.accountID, state: .unreachable, at: call.createdAt)
            logger.info("no reachable device", metadata: ["call.source": .string(call.source.rawValue)])
            metrics.recordFanout(0)
            metrics.recordCallOutcome(.unreachable)
            return Result(call: call, deliveries: [], replayed: false)
        }
        store.recordDeliveries(plan.deliveries)
        metrics.recordFanout(plan.count)
        logger.info(
            "ringing",
            metadata: [
                "call.source": .string(call.source.rawValue), "ring.fanout": .stringConvertible(plan.count),
                "ring.live": .stringConvertible(plan.live.count),
            ])
        let deliveries = await executor.execute(
            plan, call: call, content: content, calleeBusy: calleeBusy, logger: logger, waitAtMost: waitAtMost ?? .zero)
        if let first = deliveries.compactMap(\.completedAt).min() {
            metrics.recordFirstPush(first.timeIntervalSince(call.createdAt))
        }
        // The answer reports these records: they are on disk before it goes out (a crash after
        // a 201 must not show the call without them). Under load one write serves many rings.
        try await store.flushDeliveries()
        return Result(call: call, deliveries: deliveries, replayed: false)
    }
}
