import Foundation

/// How a call to several identities rings.
public enum RingMode: String, Sendable, Hashable, CaseIterable, Codable {
    /// A hunt group: every identity rings, the first accept wins, every other device stops ringing
    /// (answered elsewhere).
    case first
    /// Everyone is invited: each identity joins on its own while the rest ring on until the ring
    /// timeout; the call ends when the caller hangs up or the last identity in it leaves.
    case all
}

/// Where one identity of a ring group stands.
public enum ParticipantState: String, Sendable, Hashable, CaseIterable, Codable {
    /// Its devices ring.
    case ringing
    /// It answered and is in the call (until it leaves, or the call ends).
    case accepted
    /// One of its devices declined.
    case declined
    /// Not rung: it was in another call and the caller asked not to ring then (`ifBusy: reject`).
    case busy
    /// Not rung: it had no live connection and no binding the ring could use.
    case unreachable
    /// Its ring timed out.
    case missed
    /// Its ring ended before it answered: the caller gave up, or the call ended without it.
    case cancelled
    /// Mode `first`: another identity answered first.
    case answeredElsewhere = "answered_elsewhere"
    /// It was in the call and hung up; the call went on without it.
    case left
}

/// One identity of a ring group.
public struct CallParticipant: Sendable, Hashable, Codable {
    /// The identity rung.
    public var identity: String
    /// Where it stands.
    public var state: ParticipantState
    /// The device that accepted for it.
    public var answeredBy: String?
    /// When it accepted.
    public var answeredAt: Date?
    /// When its part of the call ended.
    public var endedAt: Date?

    /// Creates a participant, ringing unless told otherwise.
    public init(identity: String, state: ParticipantState = .ringing, answeredBy: String? = nil, answeredAt: Date? = nil, endedAt: Date? = nil) {
        self.identity = identity
        self.state = state
        self.answeredBy = answeredBy
        self.answeredAt = answeredAt
        self.endedAt = endedAt
    }
}

/// The identities a ring group rings and how.
public struct RingGroup: Sendable, Hashable, Codable {
    /// Most identities one call may ring.
    public static let maxMembers = 20

    /// How it rings.
    public var mode: RingMode
    /// Every identity rung, in the order the caller named them.
    public var members: [CallParticipant]

    /// Creates a group of ringing identities.
    public init(mode: RingMode, members: [CallParticipant]) {
        self.mode = mode
        self.members = members
    }

    /// The participant for `identity`, if it is one.
    public func member(_ identity: String) -> CallParticipant? {
        members.first { $0.identity == identity }
    }

    /// Whether any identity still rings.
    public var anyRinging: Bool { members.contains { $0.state == .ringing } }

    /// The identities in the call now.
    public var joined: [CallParticipant] { members.filter { $0.state == .accepted } }
}
