import Foundation

/// An incoming call as the system call UI shows it.
public struct IncomingCallReport: Sendable, Hashable {
    /// The call's UUID.
    public var uuid: UUID
    /// The caller.
    public var caller: CallParty
    /// Whether it is a video call.
    public var hasVideo: Bool

    /// Creates a report.
    public init(uuid: UUID, caller: CallParty, hasVideo: Bool) {
        self.uuid = uuid
        self.caller = caller
        self.hasVideo = hasVideo
    }
}

/// An outgoing call as the system call UI shows it.
public struct OutgoingCallReport: Sendable, Hashable {
    /// The call's UUID.
    public var uuid: UUID
    /// The callee.
    public var callee: CallParty
    /// Whether it is a video call.
    public var hasVideo: Bool

    /// Creates a report.
    public init(uuid: UUID, callee: CallParty, hasVideo: Bool) {
        self.uuid = uuid
        self.callee = callee
        self.hasVideo = hasVideo
    }
}

/// Who asked for a call action: the app (through ``Call``) or the system call UI (the user
/// tapped a CallKit button). Actions from the system UI are not reported back to it.
public enum ActionOrigin: Sendable, Hashable {
    /// The app's own UI or logic.
    case app
    /// The system call UI, through its bridge.
    case systemUI
}

/// The system call UI as the SDK drives it: CallKit on iOS (``CallKitBridge``), a recording fake
/// in tests, whatever a terminal app shows elsewhere.
///
/// The SDK calls these methods from any thread, never while holding its own locks, so an
/// implementation may call back into the ``CallManager``.
public protocol SystemCallUI: Sendable {
    /// Shows an incoming call. Must happen at once: a VoIP push is only handled once this was
    /// called. `completion` gets the system's refusal, if any (Do Not Disturb, blocked caller).
    func reportIncomingCall(_ report: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void)

    /// What an incoming call shows changed: the caller of a sealed ring, once its box is open.
    /// A default does nothing.
    func reportIncomingCallUpdated(_ report: IncomingCallReport)

    /// An outgoing call was placed and the callee's devices are being rung.
    func reportOutgoingCallStarted(_ report: OutgoingCallReport)

    /// An outgoing call was answered by the callee.
    func reportOutgoingCallConnected(uuid: UUID)

    /// The call ended for a reason the user did not choose here (the caller hung up, another
    /// device answered, the push was stale, …).
    func reportCallEnded(uuid: UUID, reason: CallEndReason)

    /// The app ended the call (hang up, decline or cancel through its own UI).
    func reportCallEndedByUser(uuid: UUID)

    /// The app put the call on hold or resumed it (answering a second call holds the first).
    func reportCallHeld(uuid: UUID, onHold: Bool)

    /// The app muted or unmuted the call (``Call/setMuted(_:)``). A default does nothing.
    func reportCallMuted(uuid: UUID, muted: Bool)

    /// The answer of an incoming call is confirmed: this device won the call.
    func fulfillAnswer(uuid: UUID)

    /// The answer failed: the call was answered elsewhere, cancelled, or the server is out of reach.
    func failAnswer(uuid: UUID)
}

extension SystemCallUI {
    /// Does nothing: a system call UI that shows no caller need not hear of it.
    public func reportIncomingCallUpdated(_ report: IncomingCallReport) {}

    /// Does nothing: a system call UI without a mute button need not hear of it.
    public func reportCallMuted(uuid: UUID, muted: Bool) {}
}
