import RingRelayCore
import RingRelayWire

extension CallEventType {
    /// The wire event for an event the call rules planned.
    ///
    /// Core plans events without knowing the wire types, and Wire does not know the domain; this is
    /// the one place the two meet, checked by the compiler: a kind without a wire event fails to build.
    init(_ kind: CallEventKind) {
        switch kind {
        case .cancelled: self = .cancelled
        case .answeredElsewhere: self = .answeredElsewhere
        case .declinedElsewhere: self = .declinedElsewhere
        case .accepted: self = .accepted
        case .rejected: self = .rejected
        case .ended: self = .ended
        case .missed: self = .missed
        }
    }
}
