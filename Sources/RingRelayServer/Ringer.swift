import Foundation
import Logging
import RingRelayCore
import RingRelayWire

/// Rings a callee's devices for one call: creates the call record (once per provider
/// notification), plans one delivery per live connection and per push binding, rings them through
/// the engine and records every answer.
///
/// Live first: a device with a live connection gets the ring over it; its push bindings (matched
/// by `deviceId`) are used only when it does not ack within the fallback window. Bindings without
/// a `deviceId`, and devices without a connection, are pushed at once.
struct Ringer: Sendable {
    /// The content of one ring, in each channel's form. A binding whose channel has no content is
    /// not rung (a provider call has no sealed invite for alert bindings, for example).
    struct Content: Sendable {
        /// The event sent over live connections: `call.incoming` for native calls,
        /// `call.notification` (with the provider's payload, byte for byte) for provider calls.
        var liveEvent: CallEventType = .incoming
        /// The provider's payload carried by `call.notification`.
        var livePayload: [UInt8]?
        /// Body of a VoIP push to `apns_voip` bindings.
        var apnsVoIP: [UInt8]?
        /// Bodies of alert pushes to `apns_alert` bindings, by binding id (sealed invites).
        var apnsAlert: [String: [UInt8]] = [:]
        /// Data of an FCM message to `fcm` bindings.
        var fcmData: [String: String]?

        func payload(for binding: Binding) -> BindingPusher.Payload? {
            switch binding.type {
            case .apnsVoIP: apnsVoIP.map(BindingPusher.Payload.apns)
            case .apnsAlert: apnsAlert[binding.id].map(BindingPusher.Payload.apns)
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
    let hub: LiveHub
    let clock: any WallClock
    let metrics: ServerMetrics
    let logger: Logger
    /// How long a provider call rings.
    let ringTimeout: Duration
    /// How long a webhook waits for first answers before it responds.
    let answerWait: Duration
    /// How long a live ring waits for its ack before the device's push bindings are used too.
    let liveFallback: Duration

    /// Rings `callee`'s devices for a provider notification.
    func ring(
        accountID: String, source: CallSource, externalID: String?, caller: String?, callee: String, content: Content
    ) async throws -> Result {
        let now = clock.now
        let call = Call(
            id: ResourceID.make(ResourceID.call, at: now), accountID: accountID, source: source, caller: caller, callee: callee,
            state: .ringing, externalID: externalID, createdAt: now, ringDeadline: now.addingTimeInterval(ringTimeout.timeInterval),
            updatedAt: now)
        return try await ring(call, waitAtMost: answerWait) { _ in content }
    }

    /// Creates `fresh` (or finds the call it repeats) and rings its callee.
    ///
    /// - Parameters:
    ///   - waitAtMost: how long to wait for first answers; `nil` returns as soon as the ring is planned.
    ///   - content: the ring's content, given whether the callee is busy.
    func ring(
        _ fresh: Call, waitAtMost: Duration?, content makeContent: (Bool) -> Content
    ) async throws -> Result {
        var logger = self.logger
        logger[metadataKey: "account.id"] = .string(fresh.accountID)
        switch try await store.createCall(fresh) {
        case .existing(let call):
            logger[metadataKey: "call.id"] = .string(call.id)
            logger.info("repeated notification; not ringing again", metadata: ["call.source": .string(call.source.rawValue)])
            return Result(call: call, deliveries: try await store.deliveries(callID: call.id), replayed: true)
        case .created(var call, let busy):
            logger[metadataKey: "call.id"] = .string(call.id)
            let live = hub.connectedDevices(accountID: call.accountID, identity: call.callee)
            let content = makeContent(busy)
            let bindings = try await store.activeBindings(accountID: call.accountID, identity: call.callee)
                .filter { content.payload(for: $0) != nil }
            // A connected device's bindings wait for its ack; the rest are pushed now.
            let liveSet = Set(live)
            let fallbacks = Dictionary(grouping: bindings.filter { $0.deviceID.map(liveSet.contains) ?? false }) { $0.deviceID ?? "" }
            let targets = live.map(RingTarget.live) + bindings.filter { !($0.deviceID.map(liveSet.contains) ?? false) }.map(RingTarget.binding)
            guard !targets.isEmpty else {
                call.state = .unreachable
                try await store.setCallState(id: call.id, accountID: call.accountID, state: .unreachable, at: call.createdAt)
                logger.info("no reachable device", metadata: ["call.source": .string(call.source.rawValue)])
                metrics.recordFanout(0)
                metrics.recordCallOutcome(.unreachable)
                return Result(call: call, deliveries: [], replayed: false)
            }
            let transport = Transport(
                ringer: self, content: content, calleeBusy: busy, fallbacks: fallbacks, logger: logger)
            let planned = engine.plan(call, targets: targets, transport: transport)
            store.recordDeliveries(planned.map(\.0))
            metrics.recordFanout(planned.count)
            logger.info(
                "ringing",
                metadata: [
                    "call.source": .string(call.source.rawValue), "ring.fanout": .stringConvertible(planned.count),
                    "ring.live": .stringConvertible(live.count),
                ])
            let deliveries = await engine.ring(call, planned: planned, transport: transport, waitAtMost: waitAtMost ?? .zero)
            if let first = deliveries.compactMap(\.completedAt).min() {
                metrics.recordFirstPush(first.timeIntervalSince(call.createdAt))
            }
            return Result(call: call, deliveries: deliveries, replayed: false)
        }
    }

    /// Rings live connections and pushes through ``BindingPusher``, recording each answer in the store.
    struct Transport: RingTransport {
        let ringer: Ringer
        let content: Content
        let calleeBusy: Bool
        /// Bindings of connected devices, by device id: pushed only when the live ring goes unacknowledged.
        let fallbacks: [String: [Binding]]
        let logger: Logger

        func route(_ target: RingTarget) -> (channel: PushChannel, kind: String) {
            switch target {
            case .live: (.websocket, "event")
            case .binding(let binding):
                switch binding.type {
                case .apnsVoIP: (.apns, "voip")
                case .apnsAlert: (.apns, "alert")
                case .fcm: (.fcm, "data")
                }
            }
        }

        func deliver(_ delivery: Delivery, to target: RingTarget, call: Call) async -> Delivery {
            let answered: Delivery
            switch target {
            case .binding(let binding): answered = await push(delivery, to: binding, call: call)
            case .live(let deviceID): answered = await ringLive(delivery, deviceID: deviceID, call: call)
            }
            ringer.store.recordDeliveries([answered])
            return answered
        }

        /// Sends the ring over the device's connection and waits for the ack; without one in time,
        /// the device's push bindings are rung too (once, and only while the call still rings).
        private func ringLive(_ delivery: Delivery, deviceID: String, call: Call) async -> Delivery {
            let key = DeviceKey(accountID: call.accountID, identity: call.callee, deviceID: deviceID)
            let start = ContinuousClock.now
            var answered = delivery
            answered.attempts = 1
            if let eventID = ringer.hub.ring(
                content.liveEvent, call: call, to: key, calleeBusy: calleeBusy, provider: call.source == .native ? nil : call.source,
                rawPayload: content.livePayload),
                await ringer.hub.awaitAck(eventID, within: ringer.liveFallback)
            {
                answered.outcome = PushDisposition.delivered.metricName
                answered.latencyMs = ((ContinuousClock.now - start).timeInterval * 1_000_000).rounded() / 1000
                answered.completedAt = ringer.clock.now
                return answered
            }
            answered.outcome = "unacknowledged"
            answered.completedAt = ringer.clock.now
            let bindings = fallbacks[deviceID] ?? []
            guard !bindings.isEmpty else { return answered }
            do {
                guard try await ringer.store.call(id: call.id, accountID: call.accountID)?.state == .ringing else { return answered }
                let planned = ringer.engine.plan(call, targets: bindings.map(RingTarget.binding), transport: self)
                ringer.store.recordDeliveries(planned.map(\.0))
                ringer.metrics.recordLiveFallback(planned.count)
                logger.info("live ring unacknowledged; pushing", metadata: ["device.id": .string(deviceID)])
                await withTaskGroup(of: Void.self) { group in
                    for (fallback, target) in planned {
                        guard case .binding(let binding) = target else { continue }
                        group.addTask { ringer.store.recordDeliveries([await push(fallback, to: binding, call: call)]) }
                    }
                }
            } catch {
                logger.error("could not fall back to push", metadata: ["device.id": .string(deviceID), "error.cause": .string("\(error)")])
            }
            return answered
        }

        private func push(_ delivery: Delivery, to binding: Binding, call: Call) async -> Delivery {
            guard let payload = content.payload(for: binding) else { return delivery }
            let clock = ringer.clock
            do {
                let result = try await ringer.pusher.push(payload, to: binding, deadline: call.ringDeadline)
                return delivery.completed(with: result.outcome, at: clock.now)
            } catch let error as RingRelayError {
                // No credential for the channel: a configuration problem of this account.
                return delivery.completed(
                    with: PushOutcome(disposition: .fixConfiguration, status: nil, reason: error.code, providerID: nil, latency: .zero, attempts: 0),
                    at: clock.now)
            } catch {
                logger.error("delivery failed", metadata: ["binding.id": .string(binding.id), "error.cause": .string("\(error)")])
                return delivery.completed(
                    with: PushOutcome(disposition: .drop, status: nil, reason: "InternalError", providerID: nil, latency: .zero, attempts: 0),
                    at: clock.now)
            }
        }
    }
}

extension DeliveryResource {
    init(_ delivery: Delivery) {
        self.init(
            id: delivery.id, bindingId: delivery.bindingID, deviceId: delivery.deviceID, channel: delivery.channel.rawValue,
            kind: delivery.kind, outcome: delivery.outcome, status: delivery.status, reason: delivery.reason, pushId: delivery.providerID,
            attempts: delivery.attempts, latencyMs: delivery.latencyMs, createdAt: delivery.createdAt, completedAt: delivery.completedAt)
    }
}

extension CallResource {
    init(_ call: Call, deliveries: [Delivery]?) {
        self.init(
            id: call.id, source: call.source.rawValue, state: call.state.rawValue, from: call.caller, displayName: call.callerName,
            to: call.callee, media: call.media.rawValue, metadata: call.metadata.flatMap { JSONValue(parsing: $0.utf8) ?? (try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8))) },
            createdAt: call.createdAt, ringEndsAt: call.ringDeadline, updatedAt: call.updatedAt, answeredAt: call.answeredAt,
            answeredBy: call.answeredBy, endedAt: call.endedAt, endReason: call.endReason?.rawValue, endedBy: call.endedBy,
            deliveries: deliveries?.map(DeliveryResource.init))
    }
}
