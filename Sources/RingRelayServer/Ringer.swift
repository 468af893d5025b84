import Foundation
import Logging
import RingRelayCore
import RingRelayWire

/// Rings a callee's devices for one call: creates the call record (once per provider
/// notification), plans one delivery per reachable binding, rings them through the engine and
/// records every answer.
struct Ringer: Sendable {
    /// The content of one ring, in each channel's form. A binding whose channel has no content is
    /// not rung (a provider call has no sealed invite for alert bindings, for example).
    struct Content: Sendable {
        /// Body of a VoIP push to `apns_voip` bindings.
        var apnsVoIP: [UInt8]?
        /// Body of an alert push to `apns_alert` bindings.
        var apnsAlert: [UInt8]?
        /// Data of an FCM message to `fcm` bindings.
        var fcmData: [String: String]?

        func payload(for binding: Binding) -> BindingPusher.Payload? {
            switch binding.type {
            case .apnsVoIP: apnsVoIP.map(BindingPusher.Payload.apns)
            case .apnsAlert: apnsAlert.map(BindingPusher.Payload.apns)
            case .fcm: fcmData.map(BindingPusher.Payload.fcm)
            }
        }
    }

    /// What a ring request produced.
    struct Result: Sendable {
        var call: Call
        var deliveries: [Delivery]
        /// The notification was seen before: nothing rang now.
        var replayed: Bool
    }

    let store: any DataStore
    let engine: RingEngine
    let pusher: BindingPusher
    let clock: any WallClock
    let metrics: ServerMetrics
    let logger: Logger
    /// How long a ring lasts.
    let ringTimeout: Duration
    /// How long a webhook waits for first answers before it responds.
    let answerWait: Duration

    /// Rings `callee`'s devices.
    func ring(
        accountID: String, source: CallSource, externalID: String?, caller: String?, callee: String, content: Content
    ) async throws -> Result {
        let now = clock.now
        let fresh = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: accountID, source: source, caller: caller, callee: callee,
            state: .ringing, externalID: externalID, createdAt: now, ringDeadline: now.addingTimeInterval(ringTimeout.timeInterval),
            updatedAt: now)
        var logger = self.logger
        logger[metadataKey: "account.id"] = .string(accountID)
        switch try await store.createCall(fresh) {
        case .existing(let call):
            logger[metadataKey: "call.id"] = .string(call.id)
            logger.info("repeated notification; not ringing again", metadata: ["call.source": .string(source.rawValue)])
            return Result(call: call, deliveries: try await store.deliveries(callID: call.id), replayed: true)
        case .created(var call):
            logger[metadataKey: "call.id"] = .string(call.id)
            let bindings = try await store.listBindings(
                accountID: accountID, query: BindingQuery(identity: callee, status: .active, limit: BindingQuery.maxLimit)
            ).items.filter { content.payload(for: $0) != nil }
            guard !bindings.isEmpty else {
                call.state = .unreachable
                try await store.setCallState(id: call.id, accountID: accountID, state: .unreachable, at: now)
                logger.info("no reachable device", metadata: ["call.source": .string(source.rawValue)])
                metrics.recordFanout(0)
                return Result(call: call, deliveries: [], replayed: false)
            }
            let transport = Transport(pusher: pusher, store: store, content: content, clock: clock, logger: logger)
            let planned = engine.plan(call, bindings: bindings, transport: transport)
            try await store.insertDeliveries(planned.map(\.0))
            metrics.recordFanout(planned.count)
            logger.info("ringing", metadata: ["call.source": .string(source.rawValue), "ring.fanout": .stringConvertible(planned.count)])
            let deliveries = await engine.ring(call, planned: planned, transport: transport, waitAtMost: answerWait)
            if let first = deliveries.compactMap(\.completedAt).min() {
                metrics.recordFirstPush(first.timeIntervalSince(call.createdAt))
            }
            return Result(call: call, deliveries: deliveries, replayed: false)
        }
    }

    /// Pushes through ``BindingPusher`` and records each answer in the store.
    struct Transport: RingTransport {
        let pusher: BindingPusher
        let store: any DataStore
        let content: Content
        let clock: any WallClock
        let logger: Logger

        func route(_ binding: Binding) -> (channel: PushChannel, kind: String) {
            switch binding.type {
            case .apnsVoIP: (.apns, "voip")
            case .apnsAlert: (.apns, "alert")
            case .fcm: (.fcm, "data")
            }
        }

        func deliver(_ delivery: Delivery, to binding: Binding, call: Call) async -> Delivery {
            var answered: Delivery
            if let payload = content.payload(for: binding) {
                do {
                    let result = try await pusher.push(payload, to: binding, deadline: call.ringDeadline)
                    answered = delivery.completed(with: result.outcome, at: clock.now)
                } catch let error as RingRelayError {
                    // No credential for the channel: a configuration problem of this account.
                    answered = delivery.completed(
                        with: PushOutcome(disposition: .fixConfiguration, status: nil, reason: error.code, providerID: nil, latency: .zero, attempts: 0),
                        at: clock.now)
                } catch {
                    answered = delivery.completed(
                        with: PushOutcome(disposition: .drop, status: nil, reason: "InternalError", providerID: nil, latency: .zero, attempts: 0),
                        at: clock.now)
                    logger.error("delivery failed", metadata: ["binding.id": .string(binding.id), "error.cause": .string("\(error)")])
                }
            } else {
                answered = delivery
            }
            do {
                try await store.updateDelivery(answered)
            } catch {
                logger.error("could not record a delivery", metadata: ["delivery.id": .string(delivery.id), "error.cause": .string("\(error)")])
            }
            return answered
        }
    }
}

extension DeliveryResource {
    init(_ delivery: Delivery) {
        self.init(
            id: delivery.id, bindingId: delivery.bindingID, channel: delivery.channel.rawValue, kind: delivery.kind, outcome: delivery.outcome,
            status: delivery.status, reason: delivery.reason, pushId: delivery.providerID, attempts: delivery.attempts,
            latencyMs: delivery.latencyMs, createdAt: delivery.createdAt, completedAt: delivery.completedAt)
    }
}

extension CallResource {
    init(_ call: Call, deliveries: [Delivery]) {
        self.init(
            id: call.id, source: call.source.rawValue, state: call.state.rawValue, from: call.caller, to: call.callee,
            createdAt: call.createdAt, ringEndsAt: call.ringDeadline, updatedAt: call.updatedAt, deliveries: deliveries.map(DeliveryResource.init))
    }
}
