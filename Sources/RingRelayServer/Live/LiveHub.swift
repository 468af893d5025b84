import Crypto
import Foundation
import NIOCore
import NIOPosix
import RingRelayCore
import RingRelayWire
import Synchronization

/// One device, as the live hub knows it: the identity and device id of its access token.
struct DeviceKey: Sendable, Hashable {
    var accountID: String
    var identity: String
    var deviceID: String
}

/// The live connections of this server instance, and the events they have not acknowledged.
///
/// - One connection per device: a newer one replaces the older, which is closed with a reason.
/// - Every event gets an `eventId` and waits in the device's outbox until the device acks it, so a
///   device that reconnects (passing the last `eventId` it saw) gets what it missed. Events leave the
///   outbox when acked, when the call moves on (a ring that was answered elsewhere is not replayed)
///   or when they expire.
/// - A ring can wait for its ack: that is how ``RingExecutor`` decides to fall back to push.
///
/// All state sits behind one lock; no method awaits while holding it, and frames are handed to each
/// connection's ``Sink`` under it, so the order a device sees is the order of its ids.
///
/// With instances sharing a store, a ``Keeper`` also keeps each event where every instance can
/// read it, and marks it settled once acknowledged or withdrawn: a device that reconnects to
/// another instance gets there what it missed (see ``adopt(_:into:)``). The event of a call's
/// change has the same id on every instance (``eventID(callID:version:planned:deviceID:)``), so
/// an event two instances make for one device is one event.
final class LiveHub: Sendable {
    /// Where events are kept for the other instances; called after the hub's lock is released,
    /// so it must only hand them on (it queues them for a write).
    struct Keeper: Sendable {
        var kept: @Sendable ([KeptLiveEvent]) -> Void
        var settled: @Sendable ([String]) -> Void
    }

    /// Where one connection's frames go. Called while the hub holds its lock, so both only hand the
    /// frame on, in order.
    struct Sink: Sendable {
        /// Sends one text frame.
        var send: @Sendable (String) -> Void
        /// Closes the connection with a WebSocket close code and reason.
        var close: @Sendable (_ code: UInt16, _ reason: String) -> Void
    }

    /// An event kept for a device until acked.
    private struct Pending {
        var eventID: String
        var callID: String
        var text: String
        var isRing: Bool
        var expiresAt: Date
    }

    private struct Connection {
        var id: UInt64
        var sink: Sink
    }

    /// A ring waiting for its ack, with the device it was sent to.
    private enum AckWait {
        case pending(DeviceKey)
        case acked
        case waiting(DeviceKey, CheckedContinuation<Bool, Never>)
    }

    private struct State {
        var nextConnectionID: UInt64 = 0
        var connections: [DeviceKey: Connection] = [:]
        /// Connected device ids per (account, identity).
        var devicesByIdentity: [IdentityKey: Set<String>] = [:]
        var outboxes: [DeviceKey: [Pending]] = [:]
        /// Devices that were sent events of a call, so later events reach them after a reconnect.
        var callDevices: [String: Set<DeviceKey>] = [:]
        /// When each call in ``callDevices`` last had an event: kept while the call may still
        /// change (a ring acked and then cancelled, an accepted call ended hours later), pruned
        /// only once it is older than ``callDeviceRetention`` and nothing of it waits in an outbox.
        var callLastEvent: [String: Date] = [:]
        /// Devices another instance holds now (it took their events over): this one no longer
        /// sends them their calls' events, until they connect here again.
        var movedAway: Set<DeviceKey> = []
        var ackWaits: [String: AckWait] = [:]
        /// Calls whose ring is over for devices here, until a minute past their ring deadline: a ring that was
        /// started before the change but reaches ``ring(_:call:to:calleeBusy:provider:rawPayload:sealed:)``
        /// after it (its task ran late) must not follow the device's ending.
        var ringsOver: [String: RingOver] = [:]
    }

    /// Where a call no longer rings.
    private struct RingOver {
        /// After this the record goes (a ring is never started past the call's ring deadline).
        var until: Date
        /// The devices whose part of a ring group's call ended; `nil` when the call rings nowhere
        /// (and stays so: inserting into `nil` changes nothing).
        var devices: Set<DeviceKey>?

        func covers(_ key: DeviceKey) -> Bool { devices?.contains(key) ?? true }
    }

    private struct IdentityKey: Hashable {
        var accountID: String
        var identity: String
    }

    private let state = Mutex(State())
    private let keeper = Mutex<Keeper?>(nil)
    private let clock: any WallClock
    private let encoder = JSONEncoder.ringRelay
    /// How long an end event waits for a device that is offline.
    let endEventRetention: TimeInterval
    /// Most events kept per device; the oldest go first.
    let outboxLimit: Int
    /// How long the devices of a call are remembered after its last event, for its next one.
    let callDeviceRetention: TimeInterval = 12 * 3600
    /// Most calls whose devices are remembered; past it, the tenth with the oldest last event is
    /// forgotten (their offline devices then miss those calls' later events).
    let callDeviceLimit: Int

    init(clock: any WallClock, endEventRetention: TimeInterval = 120, outboxLimit: Int = 64, callDeviceLimit: Int = 100_000) {
        self.clock = clock
        self.endEventRetention = endEventRetention
        self.outboxLimit = outboxLimit
        self.callDeviceLimit = callDeviceLimit
    }

    /// Keeps every event from now on with `keeper` as well (instances sharing a store).
    func keepEvents(with keeper: Keeper) {
        self.keeper.withLock { $0 = keeper }
    }

    /// What one change of the hub's state gives the ``Keeper``, handed over after the lock.
    private struct Kept {
        var events: [KeptLiveEvent] = []
        var settled: [String] = []

        func handOver(to keeper: Keeper?) {
            guard let keeper else { return }
            if !events.isEmpty { keeper.kept(events) }
            if !settled.isEmpty { keeper.settled(settled) }
        }
    }

    /// The id of the event a call's change at `version` gives one device: the same on every
    /// instance that makes it.
    static func eventID(callID: String, version: Int, planned: PlannedEvent, deviceID: String) -> String {
        let name = [callID, String(version), planned.kind.rawValue, planned.identity, deviceID, planned.participant ?? "", planned.reason ?? ""]
            .joined(separator: "\u{1F}")
        let digest = SHA256.hash(data: Data(name.utf8))
        return ResourceID.event + "_" + digest.prefix(13).map { String(format: "%02x", $0) }.joined()
    }

    // MARK: Connections

    /// A registered connection; pass it back to ``disconnect(_:)``.
    struct Registration: Sendable {
        var key: DeviceKey
        var connectionID: UInt64
        var replayed: Int
    }

    /// Registers a device's new connection: closes the one it replaces, sends the `ready` frame,
    /// then every event the device has not acknowledged (after `lastEventID`, when it names one still kept).
    func connect(_ key: DeviceKey, lastEventID: String?, sink: Sink) -> Registration {
        let now = clock.now
        var kept = Kept()
        defer { kept.handOver(to: keeper.withLock { $0 }) }
        return state.withLock { state in
            state.nextConnectionID += 1
            let id = state.nextConnectionID
            if let old = state.connections[key] {
                old.sink.close(LiveCloseCode.replaced.rawValue, LiveCloseCode.replaced.reason)
            }
            state.connections[key] = Connection(id: id, sink: sink)
            state.movedAway.remove(key)
            state.devicesByIdentity[IdentityKey(accountID: key.accountID, identity: key.identity), default: []].insert(key.deviceID)
            var outbox = (state.outboxes[key] ?? []).filter { $0.expiresAt > now }
            // Everything up to the last event the device saw counts as seen.
            if let lastEventID, let seen = outbox.firstIndex(where: { $0.eventID == lastEventID }) {
                kept.settled += outbox[...seen].map(\.eventID)
                outbox.removeSubrange(...seen)
            }
            state.outboxes[key] = outbox.isEmpty ? nil : outbox
            let ready = LiveReady(identity: key.identity, deviceId: key.deviceID, replayed: outbox.count)
            sink.send(encode(.ready(ready)))
            for pending in outbox { sink.send(pending.text) }
            return Registration(key: key, connectionID: id, replayed: outbox.count)
        }
    }

    /// Forgets a connection that ended (unless a newer one has replaced it already).
    func disconnect(_ registration: Registration) {
        state.withLock { state in
            guard state.connections[registration.key]?.id == registration.connectionID else { return }
            state.connections[registration.key] = nil
            let identity = IdentityKey(accountID: registration.key.accountID, identity: registration.key.identity)
            state.devicesByIdentity[identity]?.remove(registration.key.deviceID)
            if state.devicesByIdentity[identity]?.isEmpty == true { state.devicesByIdentity[identity] = nil }
        }
    }

    /// Closes every connection with `code` (a shutdown: 1001, going away).
    func closeAll(code: LiveCloseCode) {
        let sinks = state.withLock { state in state.connections.values.map(\.sink) }
        for sink in sinks { sink.close(code.rawValue, code.reason) }
    }

    /// Closes one connection whose access token expired (4002); the device reconnects with a new one.
    func closeExpired(_ registration: Registration) {
        close(code: .tokenExpired, onlyConnection: registration.connectionID) { $0 == registration.key }
    }

    /// Closes every connection of a deleted account (4003) and forgets what waited for them.
    func closeAccount(_ accountID: String) {
        close(code: .accountDeleted, dropOutboxes: true) { $0.accountID == accountID }
    }

    /// Closes the connections of an identity's devices that have no binding left (4004, signed
    /// out): the named devices, or every device of the identity when `deviceIDs` is `nil`.
    func closeUnbound(accountID: String, identity: String, deviceIDs: Set<String>?) {
        close(code: .deviceUnbound, dropOutboxes: true) { key in
            key.accountID == accountID && key.identity == identity && (deviceIDs?.contains(key.deviceID) ?? true)
        }
    }

    /// Unregisters the connections of the devices `matches` selects at once (no event reaches
    /// them after this returns), then closes them with `code`.
    ///
    /// - Parameters:
    ///   - dropOutboxes: forget the events those devices have not acknowledged (they are not coming back).
    ///   - onlyConnection: close that connection only, not a newer one of the same device.
    private func close(code: LiveCloseCode, dropOutboxes: Bool = false, onlyConnection: UInt64? = nil, where matches: (DeviceKey) -> Bool) {
        let sinks = state.withLock { state -> [Sink] in
            var sinks: [Sink] = []
            for (key, connection) in state.connections where matches(key) && (onlyConnection ?? connection.id) == connection.id {
                sinks.append(connection.sink)
                state.connections[key] = nil
                let identity = IdentityKey(accountID: key.accountID, identity: key.identity)
                state.devicesByIdentity[identity]?.remove(key.deviceID)
                if state.devicesByIdentity[identity]?.isEmpty == true { state.devicesByIdentity[identity] = nil }
            }
            if dropOutboxes {
                for key in state.outboxes.keys where matches(key) { state.outboxes[key] = nil }
            }
            return sinks
        }
        for sink in sinks { sink.close(code.rawValue, code.reason) }
    }

    /// The connected devices of an identity.
    func connectedDevices(accountID: String, identity: String) -> [String] {
        state.withLock { state in
            state.devicesByIdentity[IdentityKey(accountID: accountID, identity: identity)].map { $0.sorted() } ?? []
        }
    }

    /// Whether a call's events for `identities` concern this instance: one of them has a device
    /// connected here, or this instance sent the call's events to a device before.
    func isConcerned(accountID: String, callID: String, identities: Set<String>) -> Bool {
        state.withLock { state in
            state.callDevices[callID] != nil
                || identities.contains { state.devicesByIdentity[IdentityKey(accountID: accountID, identity: $0)] != nil }
        }
    }

    /// The accounts with a device connected here.
    func connectedAccounts() -> Set<String> {
        state.withLock { Set($0.connections.keys.map(\.accountID)) }
    }

    /// How many connections are open.
    var connectionCount: Int { state.withLock { $0.connections.count } }

    /// Sends a frame that is not an event (a `pong`, an `error`) to one connection.
    func reply(_ frame: ServerFrame, to registration: Registration) {
        let text = encode(frame)
        state.withLock { state in
            guard let connection = state.connections[registration.key], connection.id == registration.connectionID else { return }
            connection.sink.send(text)
        }
    }

    // MARK: Events

    /// What became of a ring to one device.
    enum RingSend: Equatable {
        /// Sent; its ack is awaited by this event id.
        case sent(eventID: String)
        /// The device is not connected (any more).
        case notConnected
        /// Not sent: the call no longer rings on this device (answered, declined or ended
        /// before this ring's task ran).
        case ringOver

        /// The event id of a ring that was sent.
        var eventID: String? {
            if case .sent(let eventID) = self { eventID } else { nil }
        }
    }

    /// Sends a ring to one device and notes that an ack is awaited (see ``awaitAck(_:within:)``).
    func ring(
        _ kind: CallEventType, call: Call, to key: DeviceKey, calleeBusy: Bool, provider: CallSource?, rawPayload: [UInt8]?,
        sealed: String? = nil
    ) -> RingSend {
        let now = clock.now
        let eventID = ResourceID.make(ResourceID.event, at: now)
        let event = CallEvent(
            type: kind, eventId: eventID, callId: call.id, call: CallResource(call, deliveries: nil), sentAt: now,
            calleeBusy: calleeBusy ? true : nil, provider: provider?.rawValue, sealed: sealed)
        var text = encode(.event(event))
        if let rawPayload { text = Self.splice(payload: rawPayload, into: text) }
        let pending = Pending(eventID: eventID, callID: call.id, text: text, isRing: true, expiresAt: call.ringDeadline)
        var kept = Kept()
        defer { kept.handOver(to: keeper.withLock { $0 }) }
        return state.withLock { state -> RingSend in
            guard state.ringsOver[call.id]?.covers(key) != true else { return .ringOver }
            guard let connection = state.connections[key] else { return .notConnected }
            state.ackWaits[eventID] = .pending(key)
            enqueue(pending, for: key, kind: kind, in: &state, kept: &kept)
            connection.sink.send(text)
            return .sent(eventID: eventID)
        }
    }

    /// Waits until the device acks `eventID`, or `window` passes.
    /// - Returns: whether the ack came in time.
    func awaitAck(_ eventID: String, within window: Duration) async -> Bool {
        // An event-loop timer, not a Task.sleep: no task and no dispatch timer per ring.
        let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(window)) {
            self.resolveAck(eventID, acked: false)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let resumeNow: Bool? = state.withLock { state in
                switch state.ackWaits[eventID] {
                case .acked:
                    state.ackWaits[eventID] = nil
                    return true
                case .pending(let device):
                    state.ackWaits[eventID] = .waiting(device, continuation)
                    return nil
                case .waiting, nil:
                    return false
                }
            }
            if let resumeNow { continuation.resume(returning: resumeNow) }
        }
    }

    /// Stops waiting for `eventID`'s acknowledgement: ``awaitAck(_:within:)`` answers `false` now
    /// (a shutdown does not wait out a ring's window).
    func abandonAck(_ eventID: String) {
        resolveAck(eventID, acked: false)
    }

    private func resolveAck(_ eventID: String, acked: Bool) {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            switch state.ackWaits[eventID] {
            case .waiting(_, let continuation):
                state.ackWaits[eventID] = nil
                return continuation
            case .pending:
                if acked { state.ackWaits[eventID] = .acked } else { state.ackWaits[eventID] = nil }
                return nil
            case .acked, nil:
                if !acked { state.ackWaits[eventID] = nil }
                return nil
            }
        }
        waiter?.resume(returning: acked)
    }

    /// A device acknowledged an event.
    /// - Returns: whether the event was waiting for an ack.
    @discardableResult
    func ack(_ eventID: String, from key: DeviceKey) -> Bool {
        var kept = Kept()
        defer { kept.handOver(to: keeper.withLock { $0 }) }
        let known = state.withLock { state -> Bool in
            if var outbox = state.outboxes[key], let index = outbox.firstIndex(where: { $0.eventID == eventID }) {
                outbox.remove(at: index)
                state.outboxes[key] = outbox.isEmpty ? nil : outbox
                kept.settled = [eventID]
                return true
            }
            // A ring withdrawn from the outbox because the call stopped ringing (another device
            // accepted) after this device got it: its ack still proves the ring was delivered.
            switch state.ackWaits[eventID] {
            case .pending(let device), .waiting(let device, _): return device == key
            case .acked, nil: return false
            }
        }
        if known { resolveAck(eventID, acked: true) }
        return known
    }

    /// Sends the events of a state change: to the connected devices the plan selects, and to devices
    /// that were sent this call's events before and are offline now (they get them on reconnect).
    /// A device's ring of the call that was never acknowledged is withdrawn once its ring is over:
    /// when the call stops ringing, or (in a ring group that rings on) when the device is told how
    /// its identity's part ended.
    ///
    /// - Parameters:
    ///   - version: the call's version the events are of (another instance's change may be
    ///     older than the call as read here); it names them.
    ///   - only: send to this device only (one that reconnected and missed the change).
    func publish(_ events: [PlannedEvent], call: Call, version: Int? = nil, only: DeviceKey? = nil) {
        let now = clock.now
        let resource = CallResource(call, deliveries: nil)
        let expiresAt = max(now.addingTimeInterval(endEventRetention), call.ringDeadline)
        let final = !call.isLive
        var kept = Kept()
        defer { kept.handOver(to: keeper.withLock { $0 }) }
        // A ring of the call that has not gone out yet is never sent after this.
        let ringOverUntil = max(call.ringDeadline, now).addingTimeInterval(60)
        state.withLock { state in
            let rungBefore = state.callDevices[call.id] ?? []
            let ringOver = call.state != .ringing && (call.group == nil || final)
            if ringOver {
                for key in rungBefore {
                    kept.settled += withdrawRings(of: call.id, for: key, in: &state)
                }
            }
            var sentHere = false
            for planned in events {
                let identity = IdentityKey(accountID: call.accountID, identity: planned.identity)
                var devices = Set((state.devicesByIdentity[identity] ?? []))
                devices.formUnion(rungBefore.filter { $0.identity == planned.identity && !state.movedAway.contains($0) }.map(\.deviceID))
                if let only { devices = only.identity == planned.identity ? [only.deviceID] : [] }
                for deviceID in devices.sorted() where planned.devices.includes(deviceID) {
                    let key = DeviceKey(accountID: call.accountID, identity: planned.identity, deviceID: deviceID)
                    sentHere = true
                    if call.group != nil {
                        kept.settled += withdrawRings(of: call.id, for: key, in: &state)
                        // The device's part ended while the group's call rings on for others.
                        if !ringOver { state.ringsOver[call.id, default: RingOver(until: ringOverUntil, devices: [])].devices?.insert(key) }
                    }
                    let eventID = Self.eventID(callID: call.id, version: version ?? call.version, planned: planned, deviceID: deviceID)
                    let event = CallEvent(
                        type: planned.kind, eventId: eventID, callId: call.id, call: resource,
                        sentAt: now, reason: planned.reason, participant: planned.participant)
                    let text = encode(.event(event))
                    let pending = Pending(eventID: eventID, callID: call.id, text: text, isRing: false, expiresAt: expiresAt)
                    guard enqueue(pending, for: key, kind: planned.kind, in: &state, kept: &kept) else { continue }
                    state.connections[key]?.sink.send(text)
                }
            }
            // Remembered only where a ring could still come: a call with devices here.
            if ringOver, sentHere || !rungBefore.isEmpty { state.ringsOver[call.id] = RingOver(until: ringOverUntil, devices: nil) }
            if final {
                state.callDevices[call.id] = nil
                state.callLastEvent[call.id] = nil
            }
        }
    }

    /// Takes over events another instance kept for a device that has just connected here, oldest
    /// first: each one the device does not have yet joins its outbox and is sent, after what it
    /// got on connecting. (They stay kept: the store now names this instance as their keeper.)
    func adopt(_ events: [KeptLiveEvent], into registration: Registration) {
        var kept = Kept()
        defer { kept.handOver(to: keeper.withLock { $0 }) }
        state.withLock { state in
            guard let connection = state.connections[registration.key], connection.id == registration.connectionID else { return }
            for event in events {
                let pending = Pending(
                    eventID: event.eventID, callID: event.callID, text: event.text, isRing: event.kind.isRing, expiresAt: event.expiresAt)
                guard enqueue(pending, for: registration.key, kind: event.kind, in: &state, kept: &kept, keep: false) else { continue }
                connection.sink.send(event.text)
            }
        }
    }

    /// Forgets what this instance kept for a device another instance holds now (it took the
    /// events over), unless the device is connected here again.
    func forget(_ key: DeviceKey) {
        state.withLock { state in
            guard state.connections[key] == nil else { return }
            state.outboxes[key] = nil
            state.movedAway.insert(key)
        }
    }

    /// Drops expired events and the bookkeeping of calls nobody waits for.
    func prune() {
        let now = clock.now
        state.withLock { state in
            for (key, outbox) in state.outboxes {
                let kept = outbox.filter { $0.expiresAt > now }
                state.outboxes[key] = kept.isEmpty ? nil : kept
            }
            state.ringsOver = state.ringsOver.filter { $0.value.until > now }
            let calls = Set(state.outboxes.values.joined().map(\.callID))
            // A call whose events were all acknowledged is kept for a while: its devices must still
            // get its next event when they are offline (dropping it here lost a cancellation).
            let recent = now.addingTimeInterval(-callDeviceRetention)
            state.callDevices = state.callDevices.filter { calls.contains($0.key) || (state.callLastEvent[$0.key] ?? .distantPast) > recent }
            state.callLastEvent = state.callLastEvent.filter { state.callDevices[$0.key] != nil }
            if !state.movedAway.isEmpty {
                let remembered = Set(state.callDevices.values.joined())
                state.movedAway = state.movedAway.filter { remembered.contains($0) }
            }
        }
    }

    /// Adds an event to the device's outbox and hands it to the keeper.
    /// - Returns: `false` when the device has the event already (another instance made it too).
    @discardableResult
    private func enqueue(_ pending: Pending, for key: DeviceKey, kind: CallEventType, in state: inout State, kept: inout Kept, keep: Bool = true) -> Bool {
        var outbox = state.outboxes[key] ?? []
        guard !outbox.contains(where: { $0.eventID == pending.eventID }) else { return false }
        outbox.append(pending)
        if outbox.count > outboxLimit {
            kept.settled += outbox.prefix(outbox.count - outboxLimit).map(\.eventID)
            outbox.removeFirst(outbox.count - outboxLimit)
        }
        state.outboxes[key] = outbox
        if keep {
            kept.events.append(
                KeptLiveEvent(
                    eventID: pending.eventID, device: LiveDeviceAddress(accountID: key.accountID, identity: key.identity, deviceID: key.deviceID),
                    callID: pending.callID, kind: kind, text: pending.text, expiresAt: pending.expiresAt))
        }
        if state.callDevices[pending.callID] == nil, state.callDevices.count >= callDeviceLimit {
            forgetOldestCalls(in: &state)
        }
        state.callDevices[pending.callID, default: []].insert(key)
        state.callLastEvent[pending.callID] = clock.now
        return true
    }

    /// Removes the device's unacknowledged rings of a call from its outbox; returns their ids.
    private func withdrawRings(of callID: String, for key: DeviceKey, in state: inout State) -> [String] {
        guard let outbox = state.outboxes[key] else { return [] }
        let withdrawn = outbox.filter { $0.callID == callID && $0.isRing }.map(\.eventID)
        guard !withdrawn.isEmpty else { return [] }
        state.outboxes[key] = outbox.filter { !($0.callID == callID && $0.isRing) }
        return withdrawn
    }

    /// Forgets the devices of the tenth of the remembered calls whose last event is oldest (a sort
    /// once per tenth of the limit: cheap per call).
    private func forgetOldestCalls(in state: inout State) {
        let oldest = state.callLastEvent.sorted { $0.value < $1.value }.prefix(max(1, callDeviceLimit / 10))
        for (callID, _) in oldest {
            state.callDevices[callID] = nil
            state.callLastEvent[callID] = nil
        }
    }

    private func encode(_ frame: ServerFrame) -> String {
        // Events, the frames of every call, are written by hand; encoding our own value types cannot fail.
        if case .event(let event) = frame { return event.jsonText }
        return String(decoding: (try? encoder.encode(frame)) ?? Data(), as: UTF8.self)
    }

    /// Inserts `"payload":<raw bytes>` into an encoded event object, so a provider's payload reaches
    /// the device byte for byte.
    static func splice(payload: [UInt8], into object: String) -> String {
        var text = object
        guard text.hasSuffix("}") else { return text }
        text.removeLast()
        text += ",\"payload\":" + String(decoding: payload, as: UTF8.self) + "}"
        return text
    }
}
