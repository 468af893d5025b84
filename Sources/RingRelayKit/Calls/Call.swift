import Foundation
import RingRelayWire
import Synchronization

/// One call, incoming or outgoing, from ringing to ended.
///
/// Observe it with the manager's observers (``CallManager/addObserver(on:_:)``), with callbacks
/// (``onRinging``, ``onConnected``, ``onDisconnected``, ``onInfoChanged``), delivered on the
/// manager's ``CallbackExecutor``, or with ``updates()``. Act on it with ``answer()``,
/// ``reject()``, ``end()``, ``hold()``, ``resume()`` and ``setMuted(_:)``. A ring group's call
/// (``ringMode`` set) says where each identity rung stands in ``participants``.
///
/// ```swift
/// token = calls.addObserver { event in
///     guard case .incomingCall(let call) = event else { return }
///     call.onConnected = { startMedia(for: call) }
///     call.onDisconnected = { reason in stopMedia(for: call) }
/// }
/// ```
public final class Call: Sendable, Identifiable {
    /// The UUID the system call UI knows the call by; derived from ``key``, so every sighting of
    /// the call (live connection, VoIP push) agrees on it.
    public let uuid: UUID
    /// What identifies the call at its source.
    public let key: CallKey
    /// Who started it.
    public let direction: CallDirection
    /// Where it comes from.
    public let source: CallSource

    /// ``uuid``.
    public var id: UUID { uuid }

    /// What the app can read about the call besides its state.
    struct Info: Sendable, Hashable {
        var remote: CallParty
        var media: CallMedia
        var calleeBusy = false
        var serverCallId: String?
        var providerPayload: JSONValue?
        var metadata: JSONValue?
        var ringMode: RingMode?
        /// Changed by ``updateParticipants(_:)`` only, which tells observers of it as such.
        var participants: [CallParticipant] = []
    }

    private struct Observers: Sendable {
        var onRinging: (@Sendable () -> Void)?
        var onConnected: (@Sendable () -> Void)?
        var onDisconnected: (@Sendable (CallEndReason?) -> Void)?
        var onInfoChanged: (@Sendable () -> Void)?
        var streams: [Int: AsyncStream<CallUpdate>.Continuation] = [:]
        var nextStream = 0
    }

    private struct Storage: Sendable {
        var state: CallState
        var info: Info
        var isMuted = false
        var observers = Observers()
    }

    private let storage: Mutex<Storage>
    private let executor: any CallbackExecutor
    private let manager: CallManager

    init(key: CallKey, direction: CallDirection, source: CallSource, info: Info, manager: CallManager, executor: any CallbackExecutor) {
        self.uuid = key.uuid
        self.key = key
        self.direction = direction
        self.source = source
        self.manager = manager
        self.executor = executor
        self.storage = Mutex(Storage(state: .ringing, info: info))
    }

    // MARK: State and info

    /// Where the call is now.
    public var state: CallState { storage.withLock { $0.state } }
    /// The other side: the caller of an incoming call, the callee of an outgoing one.
    public var remote: CallParty { storage.withLock { $0.info.remote } }
    /// Audio or video.
    public var media: CallMedia { storage.withLock { $0.info.media } }
    /// The callee was already in an accepted call when this one rang; the app decides whether to
    /// offer hold-and-answer.
    public var calleeBusy: Bool { storage.withLock { $0.info.calleeBusy } }
    /// The server's `call_…` id, once known (always for RingRelay calls; for provider calls only
    /// when the live connection announced them).
    public var serverCallId: String? { storage.withLock { $0.info.serverCallId } }
    /// For Twilio and Webex calls: the provider's payload, unchanged, for the provider's SDK.
    public var providerPayload: JSONValue? { storage.withLock { $0.info.providerPayload } }
    /// The caller's metadata, unchanged.
    public var metadata: JSONValue? { storage.withLock { $0.info.metadata } }
    /// Whether the call is muted: set in the system call UI or by ``setMuted(_:)``. The SDK
    /// carries no media; the app mutes its microphone when it hears
    /// ``CallManager/Event/muteChanged(_:isMuted:)``.
    public var isMuted: Bool { storage.withLock { $0.isMuted } }
    /// For a ring group (a call to several identities at once), how it rings; `nil` for a call
    /// to one identity.
    public var ringMode: RingMode? { storage.withLock { $0.info.ringMode } }
    /// For a ring group, every identity rung, in the order the caller named them, with where each
    /// stands: who rings, who joined, declined, missed or left. Empty for a call to one identity.
    /// Observers hear of each change (``CallManager/Event/participantsChanged(_:changed:)``).
    ///
    /// For an outgoing call, ``remote`` is the first identity named; the participants say who
    /// answered.
    public var participants: [CallParticipant] { storage.withLock { $0.info.participants } }

    // MARK: Observers

    /// Incoming: the call rings here. Outgoing: the callee's devices ring.
    public var onRinging: (@Sendable () -> Void)? {
        get { storage.withLock { $0.observers.onRinging } }
        set { storage.withLock { $0.observers.onRinging = newValue } }
    }

    /// The call is established (answered and confirmed, or resumed after hold).
    public var onConnected: (@Sendable () -> Void)? {
        get { storage.withLock { $0.observers.onConnected } }
        set { storage.withLock { $0.observers.onConnected = newValue } }
    }

    /// The call is over, with the system call UI's reason (`nil` when ended on this device).
    /// Also called when another device answered or declined it.
    public var onDisconnected: (@Sendable (CallEndReason?) -> Void)? {
        get { storage.withLock { $0.observers.onDisconnected } }
        set { storage.withLock { $0.observers.onDisconnected = newValue } }
    }

    /// The caller, media, busy flag or server id changed.
    public var onInfoChanged: (@Sendable () -> Void)? {
        get { storage.withLock { $0.observers.onInfoChanged } }
        set { storage.withLock { $0.observers.onInfoChanged = newValue } }
    }

    /// A stream of the call's changes. It starts with the current state and finishes when the
    /// call ends. Each call of this method makes a new, independent stream.
    public func updates() -> AsyncStream<CallUpdate> {
        let (stream, continuation) = AsyncStream.makeStream(of: CallUpdate.self)
        storage.withLock { storage in
            continuation.yield(.stateChanged(storage.state))
            if storage.state.isEnded {
                continuation.finish()
                return
            }
            let id = storage.observers.nextStream
            storage.observers.nextStream += 1
            storage.observers.streams[id] = continuation
            continuation.onTermination = { [weak self] _ in
                self?.storage.withLock { _ = $0.observers.streams.removeValue(forKey: id) }
            }
        }
        return stream
    }

    // MARK: Actions

    /// Answers a ringing incoming call. Any connected call is put on hold first.
    ///
    /// Returns once the server confirms that this device won the call; the call is then
    /// ``CallState/connected``.
    /// - Throws: ``RingRelayError`` when the call can no longer be answered (answered elsewhere,
    ///   cancelled) or the server cannot be reached; the call has then ended.
    public func answer() async throws(RingRelayError) { try await manager.answer(self, origin: .app) }

    /// Declines a ringing incoming call on every device of this identity.
    public func reject() async throws(RingRelayError) { try await manager.reject(self, origin: .app) }

    /// Ends the call: hangs up a call in progress, cancels an outgoing call that rings, declines an
    /// incoming call that rings. Other calls stay as they are.
    public func end() async throws(RingRelayError) { try await manager.end(self, origin: .app) }

    /// Puts a connected call on hold (locally: the app pauses its media).
    public func hold() throws(RingRelayError) { try manager.setHeld(self, true, origin: .app) }

    /// Resumes a held call, putting the connected call, if any, on hold.
    public func resume() throws(RingRelayError) { try manager.setHeld(self, false, origin: .app) }

    /// Mutes or unmutes the call from the app's own UI: the system call UI shows it, and
    /// observers hear ``CallManager/Event/muteChanged(_:isMuted:)``. Setting the current value
    /// does nothing.
    ///
    /// - Throws: ``RingRelayError/invalidCallState(_:)`` when the call is over.
    public func setMuted(_ muted: Bool) throws(RingRelayError) { try manager.setMuted(self, muted, origin: .app) }

    // MARK: Transitions (used by the manager)

    /// Moves to `next` when the current state passes `allowed`.
    ///
    /// - Returns: the state before, or `nil` when the transition was not allowed.
    @discardableResult
    func transition(to next: CallState, if allowed: (CallState) -> Bool) -> CallState? {
        let (previous, finished) = storage.withLock { storage -> (CallState?, [AsyncStream<CallUpdate>.Continuation]) in
            guard allowed(storage.state), storage.state != next else { return (nil, []) }
            let previous = storage.state
            storage.state = next
            for continuation in storage.observers.streams.values { continuation.yield(.stateChanged(next)) }
            guard next.isEnded else { return (previous, []) }
            defer { storage.observers.streams = [:] }
            return (previous, Array(storage.observers.streams.values))
        }
        // Finishing runs the streams' termination handlers, which take the lock: do it outside.
        for continuation in finished { continuation.finish() }
        if previous != nil {
            notifyState(next)
            manager.publish(.stateChanged(self, next))
        }
        return previous
    }

    /// Changes the info; notifies observers when something changed.
    func updateInfo(_ change: (inout Info) -> Void) {
        let changed = storage.withLock { storage in
            let before = storage.info
            change(&storage.info)
            guard storage.info != before else { return false }
            for continuation in storage.observers.streams.values { continuation.yield(.infoChanged) }
            return true
        }
        if changed {
            deliver { $0.onInfoChanged?() }
            manager.publish(.infoChanged(self))
        }
    }

    /// Replaces the participants with the server's latest word on them; observers hear which
    /// changed, if any did.
    func updateParticipants(_ participants: [CallParticipant]) {
        let changed = storage.withLock { storage -> [CallParticipant] in
            let before = Dictionary(storage.info.participants.map { ($0.identity, $0) }, uniquingKeysWith: { first, _ in first })
            let changed = participants.filter { before[$0.identity] != $0 }
            storage.info.participants = participants
            guard !changed.isEmpty else { return [] }
            for continuation in storage.observers.streams.values { continuation.yield(.participantsChanged(changed)) }
            return changed
        }
        if !changed.isEmpty { manager.publish(.participantsChanged(self, changed: changed)) }
    }

    /// Sets the mute flag of a call that is not over; observers hear of a change.
    ///
    /// - Returns: whether the flag changed.
    func updateMuted(_ muted: Bool) -> Bool {
        let changed = storage.withLock { storage in
            guard !storage.state.isEnded, storage.isMuted != muted else { return false }
            storage.isMuted = muted
            for continuation in storage.observers.streams.values { continuation.yield(.muteChanged(muted)) }
            return true
        }
        if changed { manager.publish(.muteChanged(self, isMuted: muted)) }
        return changed
    }

    /// Tells the observers the call rings (it is created ringing).
    func announceRinging() {
        deliver { $0.onRinging?() }
    }

    private func notifyState(_ state: CallState) {
        switch state {
        case .ringing: deliver { $0.onRinging?() }
        case .connected: deliver { $0.onConnected?() }
        case .ended(let reason): deliver { $0.onDisconnected?(reason) }
        case .connecting, .held: break
        }
    }

    /// Runs `body` with the observers as they are when the executor gets to it, so an observer
    /// set just after the call was announced still hears about the first change.
    private func deliver(_ body: @escaping @Sendable (Observers) -> Void) {
        executor.execute { [self] in body(storage.withLock { $0.observers }) }
    }
}

extension Call.Info {
    /// What a call this device placed shows: the callee (the first identity named, for a ring
    /// group), the server's id, the ring group; media and metadata as the caller knows them
    /// (a sealed call's server record does not say).
    init(placed resource: CallResource, media: CallMedia, metadata: JSONValue?) {
        self.init(
            remote: CallParty(identity: resource.to), media: media, serverCallId: resource.id, metadata: metadata,
            ringMode: resource.ringMode, participants: resource.ringGroup)
    }
}
