import Foundation
import Synchronization

extension CallManager {
    /// Something that happened to this device's calls, as observers hear it
    /// (``CallManager/addObserver(on:_:)``).
    ///
    /// For each call, ``incomingCall(_:)`` or ``outgoingCall(_:)`` comes first, and
    /// ``stateChanged(_:_:)`` with ``CallState/ended(_:)`` comes last.
    public enum Event: Sendable {
        /// A new incoming call rings on this device.
        case incomingCall(Call)
        /// This device placed a call (``CallManager/startCall(to:media:displayName:avatarURL:metadata:options:)``);
        /// the callee's devices ring.
        case outgoingCall(Call)
        /// The call entered a new state.
        case stateChanged(Call, CallState)
        /// The call's remote party, media, busy flag or server id changed.
        case infoChanged(Call)
        /// In a ring group, these participants changed: someone joined, declined, missed the ring
        /// or left (``Call/participants`` has them all). Apart from ``infoChanged(_:)``, because
        /// it comes often in a group call, carries what changed (to say "Carol joined"), and
        /// changes nothing the system call UI shows.
        case participantsChanged(Call, changed: [CallParticipant])
        /// The call was muted or unmuted, in the system call UI or by ``Call/setMuted(_:)``: mute
        /// or unmute the microphone in your media engine.
        case muteChanged(Call, isMuted: Bool)
        /// The user keyed DTMF digits (`0`–`9`, `*`, `#`, and the pause characters `,` and `;` when
        /// the system sends them) in the system call UI's keypad during a connected call: send
        /// them through your media engine (RFC 4733 events, SIP INFO, the provider SDK's
        /// `sendDigits`).
        case dtmf(Call, digits: String)
        /// The sealed invite of an incoming call did not open, for this reason: the call ends as
        /// failed right after. Tell the user why (a changed key is fixed by registering it again).
        case sealedInviteRefused(Call, SealedInviteRefusal)

        /// The call the event is about.
        public var call: Call {
            switch self {
            case .incomingCall(let call), .outgoingCall(let call), .stateChanged(let call, _), .infoChanged(let call),
                .participantsChanged(let call, _), .muteChanged(let call, _), .dtmf(let call, _), .sealedInviteRefused(let call, _):
                call
            }
        }
    }

    /// One registered observer.
    struct Observer: Sendable {
        let id: Int
        let executor: any CallbackExecutor
        let handler: @Sendable (Event) -> Void
    }

    /// Adds an observer of every call of this manager. Any number of observers may watch at
    /// once, each on its own executor; each hears the events in the order they happened.
    ///
    /// ```swift
    /// self.callsToken = ringRelay.calls.addObserver { event in
    ///     switch event {
    ///     case .incomingCall(let call): CallScreen.show(call)
    ///     case .stateChanged(let call, .ended(let reason)): CallScreen.dismiss(call, reason)
    ///     case .muteChanged(let call, let muted): media.setMicrophoneMuted(muted, for: call)
    ///     case .dtmf(let call, let digits): media.sendDigits(digits, for: call)
    ///     default: break
    ///     }
    /// }
    /// ```
    ///
    /// An observer hears what happens after it was added; ``calls`` has the calls already there.
    ///
    /// - Parameters:
    ///   - executor: where `observer` runs; the configuration's ``Configuration/callbackExecutor``
    ///     (the main queue unless configured otherwise) when `nil`.
    ///   - observer: called with each event.
    /// - Returns: the token that keeps the observer registered: ``ObservationToken/cancel()`` it,
    ///   or release it, to remove the observer.
    public func addObserver(on executor: (any CallbackExecutor)? = nil, _ observer: @escaping @Sendable (Event) -> Void)
        -> ObservationToken
    {
        let executor = executor ?? configuration.callbackExecutor
        let id = table.withLock { table in
            defer { table.nextObserverID += 1 }
            table.observers.append(Observer(id: table.nextObserverID, executor: executor, handler: observer))
            return table.nextObserverID
        }
        return ObservationToken { [weak self] in
            self?.table.withLock { $0.observers.removeAll { $0.id == id } }
        }
    }

    /// Tells every observer, each on its executor. An observer removed before its executor gets
    /// to the event does not hear it.
    func publish(_ event: Event) {
        let observers = table.withLock { $0.observers }
        for observer in observers {
            observer.executor.execute { [weak self] in
                guard let self, table.withLock({ table in table.observers.contains { $0.id == observer.id } }) else { return }
                observer.handler(event)
            }
        }
    }

    /// Called (on the callback executor) for every new incoming call, before its ``Call/onRinging``.
    ///
    /// A shim over ``addObserver(on:_:)`` for code written when the manager had one observer:
    /// setting it replaces the previous closure, `nil` removes it.
    @available(*, deprecated, message: "Use addObserver(on:_:) and its .incomingCall event: any number of observers can watch the calls.")
    public var onIncomingCall: (@Sendable (Call) -> Void)? {
        get { table.withLock { $0.incomingCallShim?.handler } }
        set {
            let replacement = newValue.map { handler in
                (
                    handler: handler,
                    token: addObserver { event in
                        if case .incomingCall(let call) = event { handler(call) }
                    }
                )
            }
            let previous = table.withLock { table in
                defer { table.incomingCallShim = replacement }
                return table.incomingCallShim
            }
            // Outside the lock: cancelling takes it.
            previous?.token.cancel()
        }
    }
}
