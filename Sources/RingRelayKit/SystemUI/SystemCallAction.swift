import Foundation

/// An action the user took in the system call UI, as a bridge hands it to
/// ``CallManager/perform(_:for:)``: the platform-neutral form of CallKit's `CXCallAction`
/// subclasses.
public enum SystemCallAction: Sendable, Hashable {
    /// Answer the incoming call (`CXAnswerCallAction`).
    case answer
    /// End, decline or cancel the call (`CXEndCallAction`).
    case end
    /// Put the call on hold (`true`) or resume it (`CXSetHeldCallAction`).
    case setHeld(Bool)
    /// Mute (`true`) or unmute the call (`CXSetMutedCallAction`).
    case setMuted(Bool)
    /// Play DTMF digits in the call (`CXPlayDTMFCallAction`).
    case playDTMF(String)
    /// Merge the call with another one, or split it off with `nil` (`CXSetGroupCallAction`).
    /// Not supported: RingRelay calls are one-to-one.
    case setGroup(UUID?)
    /// Start an outgoing call (`CXStartCallAction`). Only the calls the SDK placed itself are
    /// started; a call started elsewhere (Recents, Siri) goes through the app, which calls
    /// ``CallManager/startCall(to:media:displayName:avatarURL:metadata:options:)``.
    case start
    /// An action this SDK does not know, named by its type (`CXSomethingNewCallAction`). Not
    /// supported.
    case other(String)
}

/// What the bridge does with the system's action after ``CallManager/perform(_:for:)``.
///
/// A system action is never left to time out: it is fulfilled or failed at once, or, for
/// ``pending``, settled by the SDK through ``SystemCallUI/fulfillAnswer(uuid:)`` or
/// ``SystemCallUI/failAnswer(uuid:)``.
public enum SystemCallActionOutcome: Sendable, Hashable {
    /// Done: fulfil the action now.
    case fulfilled
    /// Under way (an answer waiting for the server): the SDK settles it later through the
    /// ``SystemCallUI``.
    case pending
    /// Supported, but not possible now: the call is unknown or over, or in the wrong state (DTMF
    /// on a held call). Fail the action now.
    case failed
    /// Not supported by this SDK. Fail the action now.
    case unsupported
}
