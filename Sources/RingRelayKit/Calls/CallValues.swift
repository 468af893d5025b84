import Foundation
import RingRelayWire

/// Who started the call.
public enum CallDirection: String, Sendable, Hashable {
    /// Someone calls this device.
    case incoming
    /// This device calls someone.
    case outgoing
}

/// What the call carries.
public enum CallMedia: String, Sendable, Hashable {
    /// Voice only.
    case audio
    /// Voice and video.
    case video

    /// Reads the wire value; anything but `video` is audio.
    init(wireValue: String?) {
        self = wireValue == CallMedia.video.rawValue ? .video : .audio
    }
}

/// Where a call comes from, which decides who carries its media and signalling.
public enum CallSource: String, Sendable, Hashable {
    /// A call started through RingRelay's own calls API.
    case ringRelay
    /// A Twilio Programmable Voice call: hand ``Call/providerPayload`` to the Twilio Voice SDK.
    case twilio
    /// A Webex Calling call: hand ``Call/providerPayload`` to the Webex SDK.
    case webex
}

/// The person at the other end of a call.
public struct CallParty: Sendable, Hashable {
    /// Their identity (`alice`), as the server or provider names it.
    public var identity: String
    /// The name to show, when one is known.
    public var displayName: String?
    /// Their picture, when the caller gave one: always an `https` URL with a host (anything else a
    /// push or an event carries is dropped, see ``AvatarURLRules``). Load it as you would any
    /// remote image; the system call UI does not show it.
    public var avatarURL: URL?

    /// Creates a party.
    public init(identity: String, displayName: String? = nil, avatarURL: URL? = nil) {
        self.identity = identity
        self.displayName = displayName
        self.avatarURL = avatarURL
    }

    /// The text a call screen shows: the display name when there is one, else the identity.
    public var displayText: String { displayName ?? identity }

    /// The party shown for a push that names nobody.
    static let unknown = CallParty(identity: "unknown", displayName: "Unknown caller")
}

/// Why a call ended, in the system call UI's terms.
///
/// The raw values are `CXCallEndedReason`'s, so a CallKit bridge converts with
/// `CXCallEndedReason(rawValue: reason.rawValue)`.
public enum CallEndReason: Int, Sendable, Hashable, CaseIterable {
    /// It could not be set up or kept up: a bad push, a network or server failure, too many calls.
    case failed = 1
    /// The other side ended it, or the caller gave up before an answer.
    case remoteEnded = 2
    /// It rang out: nobody answered in time, or the push came too late.
    case unanswered = 3
    /// Another device of this identity answered it.
    case answeredElsewhere = 4
    /// Another device of this identity declined it.
    case declinedElsewhere = 5
}

extension CallEndReason {
    /// Maps the `reason` of a server end event (`cancelled`, `answered_elsewhere`, `hangup`, …).
    ///
    /// Returns `nil` for a reason this version does not know.
    init?(serverReason: String) {
        switch serverReason {
        case "cancelled", "hangup", "declined": self = .remoteEnded
        case "unanswered", "busy": self = .unanswered
        case "answered_elsewhere": self = .answeredElsewhere
        case "declined_elsewhere": self = .declinedElsewhere
        default: return nil
        }
    }

    /// Why an outgoing call the callee's side refused ended: declined reads as the remote end
    /// ending it; busy (the callee was in another call and the call asked not to ring then) as
    /// unanswered, the nearest system-call-UI ending (CallKit has no "busy").
    init(outgoingRejection reason: String?) {
        self = reason == "busy" ? .unanswered : .remoteEnded
    }

    /// Why a call that the server no longer shows as ringing should stop ringing here.
    ///
    /// - Parameters:
    ///   - call: the call as the server shows it.
    ///   - deviceId: this device, to tell its own answer from another device's.
    /// - Returns: `nil` while the call still rings, or when this device is the one that answered
    ///   (for a ring group: while any identity still rings, which may be this device's: a group
    ///   in mode all goes on ringing after the first answer, and this device's own ending comes
    ///   over the live connection).
    init?(notRinging call: CallResource, deviceId: String?) {
        guard call.state != "ringing" else { return nil }
        if call.state == "accepted", let deviceId, call.answeredBy == deviceId { return nil }
        let group = call.ringGroup
        if group.contains(where: { $0.state == .ringing || ($0.answeredBy != nil && $0.answeredBy == deviceId) }) { return nil }
        self.init(lostCallState: call.state, endReason: call.endReason)
    }

    /// Why a ringing call is lost to this device when the server shows it in `state`: the state
    /// in a 409 answer to a command (for a ring group, the state of this identity's part), or in
    /// `GET /v1/calls/{id}`.
    init(lostCallState state: String, endReason: String? = nil) {
        switch state {
        case "accepted", "answered_elsewhere": self = .answeredElsewhere
        case "rejected", "declined": self = .declinedElsewhere
        case "cancelled": self = .remoteEnded
        case "missed": self = .unanswered
        case "ended": self = endReason.flatMap(CallEndReason.init(serverReason:)) ?? .remoteEnded
        default: self = .failed
        }
    }
}

/// Where a call is in its life.
public enum CallState: Sendable, Hashable {
    /// Incoming: the device rings. Outgoing: the callee's devices ring.
    case ringing
    /// Answered here; waiting for the server to confirm that this device won the call.
    case connecting
    /// Both sides are in the call.
    case connected
    /// In the call but put on hold here (another call is active).
    case held
    /// Over. Final. The reason is `nil` when the user ended the call on this device (hung up,
    /// declined or cancelled), which the system call UI already knows about.
    case ended(CallEndReason?)

    /// Whether the call is over.
    public var isEnded: Bool {
        if case .ended = self { true } else { false }
    }

    /// Whether the call was answered and is not over (connected or held).
    public var isInProgress: Bool { self == .connected || self == .held }
}

/// One change of a call, as ``Call/updates()`` delivers it.
public enum CallUpdate: Sendable, Hashable {
    /// The call entered a new state.
    case stateChanged(CallState)
    /// The caller, media, busy flag or server id changed.
    case infoChanged
    /// The call was muted (`true`) or unmuted, in the system call UI or by ``Call/setMuted(_:)``.
    case muteChanged(Bool)
    /// These participants of a ring group changed (joined, declined, missed, left, …);
    /// ``Call/participants`` has them all.
    case participantsChanged([CallParticipant])
}
