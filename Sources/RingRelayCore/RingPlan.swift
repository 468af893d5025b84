import Foundation

/// One ring, planned: which devices get it over which channel, and which push bindings wait for a
/// device's live acknowledgement.
///
/// Planning is pure: ``make(call:liveDevices:bindings:content:now:)`` takes what the server knows
/// (the call, the callee's connected devices, its bindings, which bindings the ring has content
/// for) and returns the deliveries to start. The server executes the plan; nothing here does I/O.
///
/// - A connected device is rung over its live connection.
/// - A binding whose `deviceId` has a live connection is that device's fallback: pushed only when
///   the live ring goes unacknowledged.
/// - Every other binding is pushed at once.
/// - Inactive bindings, and bindings the ring has no content for, are left out.
///
/// ```swift
/// let plan = RingPlan.make(call: call, liveDevices: ["phone"], bindings: bindings, content: content, now: now)
/// if plan.isEmpty { /* unreachable */ }
/// ```
public struct RingPlan: Sendable, Hashable {
    /// A ring over one device's live connection.
    public struct LiveRing: Sendable, Hashable {
        /// The delivery record (channel `websocket`, kind `event`).
        public var delivery: Delivery
        /// The connected device.
        public var deviceID: String
    }

    /// A push to one binding.
    public struct Push: Sendable, Hashable {
        /// The delivery record (the binding's channel and push kind).
        public var delivery: Delivery
        /// The binding pushed to.
        public var binding: Binding

        /// Creates a push.
        public init(delivery: Delivery, binding: Binding) {
            self.delivery = delivery
            self.binding = binding
        }
    }

    /// Which bindings a ring has something to send to: a plain call has no content for alert
    /// bindings, and a sealed call only for the bindings the caller sealed a box to.
    public struct Content: Sendable, Hashable {
        /// There is a VoIP push body for `apns_voip` bindings.
        public var apnsVoIP: Bool
        /// There is FCM data for `fcm` bindings.
        public var fcm: Bool
        /// For a sealed call, the bindings with a box: only they ring (each with its own box), and
        /// of the connected devices only those they name. `nil` for a plain call.
        public var sealedBindingIDs: Set<String>?

        /// Creates a content summary.
        public init(apnsVoIP: Bool = false, fcm: Bool = false, sealedBindingIDs: Set<String>? = nil) {
            self.apnsVoIP = apnsVoIP
            self.fcm = fcm
            self.sealedBindingIDs = sealedBindingIDs
        }

        /// Whether the ring has a push for `binding` (a `live` binding is never pushed).
        public func covers(_ binding: Binding) -> Bool {
            if let sealedBindingIDs { return binding.type.isPushed && sealedBindingIDs.contains(binding.id) }
            switch binding.type {
            case .apnsVoIP: return apnsVoIP
            case .apnsAlert, .live: return false
            case .fcm: return fcm
            }
        }

        /// Whether a connected device gets the ring live: every one for a plain call; for a sealed
        /// call, one with a binding of any type that has a box (the box its live ring carries).
        public func covers(device deviceID: String, bindings: [Binding]) -> Bool {
            guard let sealedBindingIDs else { return true }
            return bindings.contains { $0.deviceID == deviceID && $0.status == .active && sealedBindingIDs.contains($0.id) }
        }
    }

    /// The kind of a live delivery.
    public static let liveKind = "event"

    /// Rings over live connections, one per connected device; started first.
    public var live: [LiveRing]
    /// Pushes started at once.
    public var pushes: [Push]
    /// The bindings held back for each connected device (by device id): pushed only if its live ring
    /// goes unacknowledged.
    public var fallbacks: [String: [Binding]]

    /// Creates a plan.
    public init(live: [LiveRing], pushes: [Push], fallbacks: [String: [Binding]]) {
        self.live = live
        self.pushes = pushes
        self.fallbacks = fallbacks
    }

    /// Whether nothing can be rung: the call is unreachable.
    public var isEmpty: Bool { live.isEmpty && pushes.isEmpty }

    /// How many deliveries start now.
    public var count: Int { live.count + pushes.count }

    /// The deliveries that start now, live first, as the store records them.
    public var deliveries: [Delivery] {
        var deliveries: [Delivery] = []
        deliveries.reserveCapacity(count)
        for ring in live { deliveries.append(ring.delivery) }
        for push in pushes { deliveries.append(push.delivery) }
        return deliveries
    }

    /// Plans a ring.
    ///
    /// - Parameters:
    ///   - call: the call being rung.
    ///   - liveDevices: the callee's devices with a live connection.
    ///   - bindings: the callee's bindings.
    ///   - content: which bindings the ring has content for.
    ///   - now: the planning time (delivery ids and `createdAt`).
    /// - Returns: the plan; empty when nothing can be rung.
    public static func make(call: Call, liveDevices: [String], bindings: [Binding], content: Content, now: Date) -> RingPlan {
        var plan = RingPlan(live: [], pushes: [], fallbacks: [:])
        plan.live.reserveCapacity(liveDevices.count)
        for deviceID in liveDevices where content.covers(device: deviceID, bindings: bindings) {
            let delivery = Delivery(
                id: ResourceID.make(ResourceID.delivery, at: now), callID: call.id, bindingID: nil, deviceID: deviceID, channel: .websocket,
                kind: liveKind, createdAt: now)
            plan.live.append(LiveRing(delivery: delivery, deviceID: deviceID))
        }
        for binding in bindings where binding.status == .active && content.covers(binding) {
            // An identity has a handful of devices: a linear search beats building a set.
            if let deviceID = binding.deviceID, plan.live.contains(where: { $0.deviceID == deviceID }) {
                plan.fallbacks[deviceID, default: []].append(binding)
            } else {
                plan.pushes.append(push(to: binding, call: call, now: now))
            }
        }
        return plan
    }

    /// Plans pushes to `bindings` (a device's fallback, once its live ring went unacknowledged);
    /// inactive bindings are left out.
    public static func pushes(to bindings: [Binding], call: Call, now: Date) -> [Push] {
        bindings.compactMap { $0.status == .active ? push(to: $0, call: call, now: now) : nil }
    }

    private static func push(to binding: Binding, call: Call, now: Date) -> Push {
        let delivery = Delivery(
            id: ResourceID.make(ResourceID.delivery, at: now), callID: call.id, bindingID: binding.id, deviceID: binding.deviceID,
            channel: binding.type.channel, kind: binding.type.pushKind, createdAt: now)
        return Push(delivery: delivery, binding: binding)
    }
}
