import Foundation
import Logging
import NIOCore
import NIOPosix
import RingRelayCore
import RingRelayWire
import ServiceLifecycle
import Synchronization

/// Keeps this instance in step with the others sharing its store: their caches, their live
/// connections, and the devices connected to them.
///
/// Controllers ``announce(_:)`` what they changed: it is applied here at once and published on
/// the ``ClusterBus``; what other instances publish is applied as it arrives. A call's events go
/// to this instance's devices and, through the bus, to the others' (``publish(_:call:)``). After a
/// gap in the bus (``ClusterDelivery/resynchronize``) every cached credential is dropped and every
/// live connection whose account is gone is closed; a binding removal missed in the gap is not
/// recovered, and such a device's connection ends with its access token. While it runs, this
/// instance tells the ``LiveDirectory`` it is alive, and leaves it on a graceful shutdown.
struct ClusterSync: Service, DescribedByNameOnly {
    let bus: any Cluster
    let store: any DataStore
    let credentials: CredentialCache
    /// The operator's settings of each account.
    let limits: AccountLimitsCache
    let faults: ConfigurationFaults
    let hub: LiveHub
    let logger: Logger
    /// Rings this instance asked other instances to send, waiting for their acknowledgement.
    private let remoteRings = RemoteRingWaits()
    /// The hub's events on their way to the store, where the other instances can take them over.
    private let keptEvents: KeptEventWrites
    /// Rings other instances asked this one to send, handed from the bus's listener to
    /// ``ringAll()``: each waits up to a second for its device's acknowledgement, and the listener
    /// must not wait with it (serially, a few hundred rings a second left a backlog older than the
    /// calls, and their rings were dropped unsent).
    private let ringsHere: AsyncStream<RemoteRing>
    private let ringInbox: AsyncStream<RemoteRing>.Continuation

    init(
        bus: any Cluster, store: any DataStore, credentials: CredentialCache, limits: AccountLimitsCache, faults: ConfigurationFaults, hub: LiveHub,
        logger: Logger
    ) {
        self.bus = bus
        self.store = store
        self.credentials = credentials
        self.limits = limits
        self.faults = faults
        self.hub = hub
        self.logger = logger
        keptEvents = KeptEventWrites(bus: bus, logger: logger)
        (ringsHere, ringInbox) = AsyncStream.makeStream(of: RemoteRing.self)
        if bus.hasPeers {
            let writes = keptEvents
            hub.keepEvents(with: LiveHub.Keeper(kept: { writes.keep($0) }, settled: { writes.settle($0) }))
        }
    }
    /// How often this instance says it is alive.
    static let heartbeatInterval: Duration = .seconds(2)
    /// Largest notice payload, well under PostgreSQL's 8,000 bytes: a call's events beyond it
    /// travel in several notices, in order.
    static let maxNoticeBytes = 6000

    /// Applies `notice` here and tells the other instances. A failure to tell them is logged, not
    /// thrown: the change is made, and the others' caches expire on their own.
    func announce(_ notice: ClusterNotice) async {
        apply(notice)
        if bus.hasPeers { await tellOthers(notice) }
    }

    /// Sends a call's events to this instance's devices, and through the bus to the devices
    /// connected to the others.
    func publish(_ events: [PlannedEvent], call: Call) async {
        await publish([(events, call)])
    }

    /// Sends the events of several calls' changes as ``publish(_:call:)`` does, in as few round
    /// trips to the bus as it allows.
    func publish(_ changes: [(events: [PlannedEvent], call: Call)]) async {
        for change in changes { hub.publish(change.events, call: change.call) }
        guard bus.hasPeers else { return }
        let notices = changes.flatMap { events, call in
            Self.chunks(events).map { ClusterNotice.callEvents(accountID: call.accountID, callID: call.id, version: call.version, events: $0) }
        }
        do {
            try await bus.publish(contentsOf: notices)
        } catch {
            logger.warning("could not tell other instances of a change", metadata: ["error.cause": .string("\(error)")])
        }
    }

    /// The identity's devices connected to other instances (device id → instance).
    func remoteDevices(accountID: String, identity: String) async -> [String: String] {
        guard bus.hasPeers else { return [:] }
        do {
            return try await bus.remoteDevices(accountID: accountID, identity: identity)
        } catch {
            // Without the directory, a device on another instance gets its push instead.
            logger.warning("could not look up devices on other instances", metadata: ["error.cause": .string("\(error)")])
            return [:]
        }
    }

    /// How a ring relayed to another instance ended.
    enum RelayAnswer: Sendable, Equatable {
        /// The device acknowledged it in time.
        case acknowledged
        /// The other instance did not send it, for this reason (``RemoteRing/notConnected``, ``RemoteRing/ringEnded``).
        case refused(String)
        /// No word within the window: the ring or its acknowledgement is late, or lost.
        case unconfirmed
        /// Not relayed: too large for a notice.
        case tooLarge
    }

    /// Asks `instance` to ring a device connected to it and waits for the device's
    /// acknowledgement, relayed back, up to `window`.
    func ringRemote(
        _ device: LiveDeviceAddress, on instance: String, call: Call, event: CallEventType, calleeBusy: Bool, payload: [UInt8]?, sealed: String?,
        within window: Duration
    ) async -> RelayAnswer {
        let ring = RemoteRing(
            ringID: UUID().uuidString, origin: bus.instanceID, target: instance, device: device, callID: call.id, event: event,
            calleeBusy: calleeBusy, provider: call.source == .native ? nil : call.source, payload: payload.map { String(decoding: $0, as: UTF8.self) },
            sealed: sealed, ackWindowMilliseconds: Int(window.timeInterval * 1000))
        guard let size = try? JSONEncoder().encode(ring).count, size <= Self.maxNoticeBytes else {
            logger.info("ring too large to relay to another instance; pushing instead", metadata: ["device.id": .string(device.deviceID)])
            return .tooLarge
        }
        return await remoteRings.wait(for: ring.ringID, within: window) {
            await self.tellOthers(.ring(ring))
        }
    }

    /// Records where a device's new connection is, and takes over what other instances kept for
    /// it (it was connected to one of them, which may be gone): the events it has not
    /// acknowledged, after `lastEventID`, minus the rings of calls that stopped ringing; then, for
    /// each call whose ring ended while it was away, the event that tells it how.
    func deviceConnected(_ registration: LiveHub.Registration, lastEventID: String?) async {
        let address = Self.address(registration.key)
        do {
            try await bus.connected(address, connection: registration.connectionID)
        } catch {
            logger.warning("could not record a live connection for the other instances", metadata: ["error.cause": .string("\(error)")])
        }
        guard bus.hasPeers else { return }
        do {
            // What this instance still has to write is the store's before anything is taken over.
            await keptEvents.flush()
            let taken = try await bus.takeOverEvents(of: address)
            await tellOthers(.deviceMoved(address, instance: bus.instanceID))
            guard !taken.isEmpty else { return }
            try await replay(taken, to: registration, after: lastEventID)
        } catch {
            logger.warning("could not take over a device's events from other instances", metadata: ["error.cause": .string("\(error)")])
        }
    }

    /// Sends a reconnected device what other instances kept for it (see ``deviceConnected(_:lastEventID:)``).
    private func replay(_ taken: [KeptLiveEvent], to registration: LiveHub.Registration, after lastEventID: String?) async throws {
        let key = registration.key
        // Everything up to the last event the device saw counts as seen.
        let seen = lastEventID.flatMap { last in taken.firstIndex { $0.eventID == last } }
        let unseen = taken.indices.filter { !taken[$0].acknowledged && $0 > (seen ?? -1) }.map { taken[$0] }
        var callIDs: [String] = []
        for event in taken where !callIDs.contains(event.callID) { callIDs.append(event.callID) }
        var calls: [String: Call] = [:]
        for callID in callIDs { calls[callID] = try await store.call(id: callID, accountID: key.accountID) }
        hub.adopt(
            unseen.filter { event in
                // A ring is sent again only while its call still rings the device's identity.
                guard event.kind.isRing else { return true }
                return calls[event.callID]?.isRinging(key.identity) == true
            }, into: registration)
        // A call whose ring ended while the device was away, with no word of it kept: the end as
        // the call's last change tells it (the same event, and id, as if it had been connected).
        for callID in callIDs {
            guard let call = calls[callID], !call.isRinging(key.identity),
                !taken.contains(where: { $0.callID == callID && !$0.kind.isRing })
            else { continue }
            hub.publish(CallRules.events(after: call, actingDevice: nil), call: call, only: key)
        }
    }

    /// Forgets a device's connection that ended.
    func deviceDisconnected(_ registration: LiveHub.Registration) async {
        do {
            try await bus.disconnected(Self.address(registration.key), connection: registration.connectionID)
        } catch {
            logger.warning("could not remove a live connection for the other instances", metadata: ["error.cause": .string("\(error)")])
        }
    }

    func run() async throws {
        // The directory is left however the listening ends (a graceful shutdown cancels it, not
        // this task): the store is still open, it closes once every service has stopped.
        do {
            try await listenAndBeat()
        } catch where Task.isShuttingDownGracefully {
            // The shutdown ended the listening (a cancelled sleep or query): not a failure of the
            // service, which would fail the whole group and read as a drain that ran out of time.
        } catch {
            await Self.leave(bus, logger: logger)
            throw error
        }
        await Self.leave(bus, logger: logger)
    }

    private func listenAndBeat() async throws {
        try await cancelWhenGracefulShutdown {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await bus.listen { delivery in await self.receive(delivery) } }
                group.addTask { await self.ringAll() }
                group.addTask {
                    while true {
                        do {
                            try await bus.heartbeat()
                        } catch {
                            logger.warning("could not tell the other instances this one is alive", metadata: ["error.cause": .string("\(error)")])
                        }
                        try await Task.sleep(for: Self.heartbeatInterval)
                    }
                }
                try await group.next()
                group.cancelAll()
            }
        }
    }

    private static func leave(_ bus: any Cluster, logger: Logger) async {
        do {
            try await bus.leave()
        } catch {
            logger.warning("could not leave the instances' directory", metadata: ["error.cause": .string("\(error)")])
        }
    }

    private func tellOthers(_ notice: ClusterNotice) async {
        do {
            try await bus.publish(notice)
        } catch {
            logger.warning("could not tell other instances of a change", metadata: ["error.cause": .string("\(error)")])
        }
    }

    private func receive(_ delivery: ClusterDelivery) async {
        switch delivery {
        case .notice(.callEvents(let accountID, let callID, let version, let events)):
            // Read the call only when a device here is concerned.
            guard hub.isConcerned(accountID: accountID, callID: callID, identities: Set(events.map(\.identity))) else { return }
            do {
                guard let call = try await store.call(id: callID, accountID: accountID) else { return }
                hub.publish(events, call: call, version: version)
            } catch {
                logger.warning("could not read a call another instance changed", metadata: ["error.cause": .string("\(error)")])
            }
        case .notice(.ring(let ring)):
            guard ring.target == bus.instanceID else { return }
            ringInbox.yield(ring)
        case .notice(.ringAcknowledged(let ringID, let origin)):
            guard origin == bus.instanceID else { return }
            remoteRings.resolve(ringID, .acknowledged)
        case .notice(.ringRefused(let ringID, let origin, let reason)):
            guard origin == bus.instanceID else { return }
            remoteRings.resolve(ringID, .refused(reason))
        case .notice(.deviceMoved(let device, let instance)):
            guard instance != bus.instanceID else { return }
            hub.forget(DeviceKey(accountID: device.accountID, identity: device.identity, deviceID: device.deviceID))
        case .notice(let notice):
            apply(notice)
        case .resynchronize:
            credentials.invalidateAll()
            limits.invalidateAll()
            for accountID in hub.connectedAccounts() {
                do {
                    if try await store.account(id: accountID) == nil { apply(.accountDeleted(accountID: accountID)) }
                } catch {
                    logger.warning("could not check an account after a bus gap", metadata: ["error.cause": .string("\(error)")])
                }
            }
        }
    }

    private func apply(_ notice: ClusterNotice) {
        switch notice {
        case .credentialsChanged(let accountID, let kind):
            credentials.invalidate(accountID: accountID)
            if let channel = PushChannel(rawValue: kind.rawValue) { faults.clear(accountID: accountID, channel: channel) }
        case .limitsChanged(let accountID):
            limits.invalidate(accountID)
        case .accountDeleted(let accountID):
            limits.invalidate(accountID)
            faults.clear(accountID: accountID)
            credentials.invalidate(accountID: accountID)
            hub.closeAccount(accountID)
        case .devicesUnbound(let accountID, let identity, let deviceIDs):
            hub.closeUnbound(accountID: accountID, identity: identity, deviceIDs: deviceIDs.map(Set.init))
        case .callEvents, .ring, .ringAcknowledged, .ringRefused, .deviceMoved:
            break
        }
    }

    /// Rings each device other instances ask this one to, side by side, as the asks arrive; until
    /// the service stops.
    private func ringAll() async {
        await withDiscardingTaskGroup { rings in
            for await ring in ringsHere {
                rings.addTask { await self.ringHere(ring) }
            }
        }
    }

    /// Sends another instance's ring to a device connected here and relays its acknowledgement,
    /// or why it was not sent.
    private func ringHere(_ ring: RemoteRing) async {
        let key = DeviceKey(accountID: ring.device.accountID, identity: ring.device.identity, deviceID: ring.device.deviceID)
        let refuse = { (reason: String) in await self.tellOthers(.ringRefused(ringID: ring.ringID, origin: ring.origin, reason: reason)) }
        do {
            guard let call = try await store.call(id: ring.callID, accountID: ring.device.accountID), call.isRinging(ring.device.identity) else {
                return await refuse(RemoteRing.ringEnded)
            }
            let eventID: String
            switch hub.ring(
                ring.event, call: call, to: key, calleeBusy: ring.calleeBusy, provider: ring.provider, rawPayload: ring.payload.map { Array($0.utf8) },
                sealed: ring.sealed)
            {
            case .sent(let sent): eventID = sent
            case .notConnected: return await refuse(RemoteRing.notConnected)
            case .ringOver: return await refuse(RemoteRing.ringEnded)
            }
            let acknowledged = await withTaskCancellationHandler {
                await hub.awaitAck(eventID, within: .milliseconds(ring.ackWindowMilliseconds))
            } onCancel: {
                hub.abandonAck(eventID)
            }
            // No word when the window passed: the origin's own window has passed too.
            guard acknowledged else { return }
            await tellOthers(.ringAcknowledged(ringID: ring.ringID, origin: ring.origin))
        } catch {
            logger.warning("could not ring a device for another instance", metadata: ["error.cause": .string("\(error)")])
        }
    }

    private static func address(_ key: DeviceKey) -> LiveDeviceAddress {
        LiveDeviceAddress(accountID: key.accountID, identity: key.identity, deviceID: key.deviceID)
    }

    /// `events` in runs whose encoding stays under ``maxNoticeBytes``, in order.
    static func chunks(_ events: [PlannedEvent]) -> [[PlannedEvent]] {
        let encoder = JSONEncoder()
        var chunks: [[PlannedEvent]] = []
        var current: [PlannedEvent] = []
        var size = 0
        for event in events {
            let bytes = (try? encoder.encode(event).count) ?? maxNoticeBytes
            if !current.isEmpty, size + bytes > maxNoticeBytes {
                chunks.append(current)
                current = []
                size = 0
            }
            current.append(event)
            size += bytes + 1
        }
        if !current.isEmpty { chunks.append(current) }
        return chunks
    }
}

/// The hub's kept and settled events, written to the store behind: what arrives while one write
/// runs goes in the next, and writes run one at a time, so an event is always kept before it is
/// settled.
private final class KeptEventWrites: Sendable {
    private struct Pending {
        var events: [KeptLiveEvent] = []
        var settled: [String] = []
        var scheduled = false
    }

    private let pending = Mutex(Pending())
    private let writes = AsyncMutex()
    private let bus: any Cluster
    private let logger: Logger
    /// How long records wait, so that a ring and its acknowledgement go in one write.
    static let writeBehind: Duration = .milliseconds(10)

    init(bus: any Cluster, logger: Logger) {
        self.bus = bus
        self.logger = logger
    }

    func keep(_ events: [KeptLiveEvent]) {
        schedule { $0.events += events }
    }

    func settle(_ eventIDs: [String]) {
        schedule { $0.settled += eventIDs }
    }

    /// Writes what waits now (a device is about to be taken over).
    func flush() async {
        await write()
    }

    private func schedule(_ add: (inout Pending) -> Void) {
        let start = pending.withLock { pending -> Bool in
            add(&pending)
            guard !pending.scheduled else { return false }
            pending.scheduled = true
            return true
        }
        guard start else { return }
        Task {
            try? await Task.sleep(for: Self.writeBehind)
            await write()
        }
    }

    private func write() async {
        do {
            try await writes.withLock {
                let batch = pending.withLock { pending -> Pending in
                    defer { pending = Pending() }
                    return pending
                }
                if !batch.events.isEmpty { try await bus.keepEvents(batch.events) }
                if !batch.settled.isEmpty { try await bus.settleEvents(batch.settled) }
            }
        } catch {
            // Those events are not taken over if their device moves; it reads its calls instead.
            logger.warning("could not keep live events for the other instances", metadata: ["error.cause": .string("\(error)")])
        }
    }
}

/// Rings relayed to other instances, each waiting for its answer or its window's end.
///
/// A wait is registered before its ring is sent, so an answer can never come before it; one
/// that comes after the window finds nothing and is dropped.
private final class RemoteRingWaits: Sendable {
    private let waits = Mutex<[String: EventLoopPromise<ClusterSync.RelayAnswer>]>([:])

    /// Registers the wait, runs `send`, and waits until ``resolve(_:_:)`` is called for `ringID` or
    /// `window` passes.
    func wait(for ringID: String, within window: Duration, send: () async -> Void) async -> ClusterSync.RelayAnswer {
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let promise = loop.makePromise(of: ClusterSync.RelayAnswer.self)
        waits.withLock { $0[ringID] = promise }
        // An event-loop timer, as for local rings: no task and no dispatch timer per ring.
        let timer = loop.scheduleTask(in: TimeAmount(window)) { self.resolve(ringID, .unconfirmed) }
        defer { timer.cancel() }
        await send()
        return (try? await promise.futureResult.get()) ?? .unconfirmed
    }

    /// The ring `ringID` has its answer.
    func resolve(_ ringID: String, _ answer: ClusterSync.RelayAnswer) {
        waits.withLock { $0.removeValue(forKey: ringID) }?.succeed(answer)
    }
}
