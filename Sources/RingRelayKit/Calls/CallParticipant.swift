import Foundation
import RingRelayWire

/// One identity a ring group rang (``Call/participants``, ``CallResource/ringGroup``), and where
/// it stands.
public struct CallParticipant: Sendable, Hashable, Identifiable {
    /// Where one identity of a ring group stands, as the server says.
    public enum State: Sendable, Hashable {
        /// Its devices ring.
        case ringing
        /// It answered and is in the call.
        case accepted
        /// One of its devices declined.
        case declined
        /// Not rung: it was in another call and the caller asked not to ring then
        /// (``CallOptions/IfBusy/reject``).
        case busy
        /// Not rung: nothing of it could be reached.
        case unreachable
        /// Its ring timed out.
        case missed
        /// Its ring ended before it answered: the caller gave up, or the call ended without it.
        case cancelled
        /// Mode ``RingMode/first``: another identity answered first.
        case answeredElsewhere
        /// It was in the call and hung up; the call went on without it.
        case left
        /// A state this version of the SDK does not know, as the server named it: newer servers
        /// may add some, and a call must not fail to show because of one.
        case unknown(String)

        /// Reads the server's name for the state (`answered_elsewhere`, …).
        public init(wireValue: String) {
            self =
                switch wireValue {
                case "ringing": .ringing
                case "accepted": .accepted
                case "declined": .declined
                case "busy": .busy
                case "unreachable": .unreachable
                case "missed": .missed
                case "cancelled": .cancelled
                case "answered_elsewhere": .answeredElsewhere
                case "left": .left
                default: .unknown(wireValue)
                }
        }

        /// The server's name for the state.
        public var wireValue: String {
            switch self {
            case .ringing: "ringing"
            case .accepted: "accepted"
            case .declined: "declined"
            case .busy: "busy"
            case .unreachable: "unreachable"
            case .missed: "missed"
            case .cancelled: "cancelled"
            case .answeredElsewhere: "answered_elsewhere"
            case .left: "left"
            case .unknown(let name): name
            }
        }
    }

    /// The identity rung.
    public var identity: String
    /// Where it stands.
    public var state: State
    /// The device id that answered for it, once one has.
    public var answeredBy: String?
    /// When it answered.
    public var answeredAt: Date?
    /// When its part of the call ended.
    public var endedAt: Date?

    /// ``identity``: an identity appears once in a ring group.
    public var id: String { identity }

    /// Creates a participant.
    public init(identity: String, state: State, answeredBy: String? = nil, answeredAt: Date? = nil, endedAt: Date? = nil) {
        self.identity = identity
        self.state = state
        self.answeredBy = answeredBy
        self.answeredAt = answeredAt
        self.endedAt = endedAt
    }

    /// Reads the server's participant.
    public init(_ resource: CallParticipantResource) {
        self.init(
            identity: resource.identity, state: State(wireValue: resource.state), answeredBy: resource.answeredBy,
            answeredAt: resource.answeredAt, endedAt: resource.endedAt)
    }
}
