import RingRelayWire

/// How RingRelayKit reads a ring group in the server's calls: history entries
/// (``RingRelayClient/recentCalls(limit:cursor:direction:states:since:until:)``) and
/// ``RingRelayClient/fetchCall(id:)``.
extension CallResource {
    /// For a ring group, how it rings; `nil` for a call to one identity (or a mode this version
    /// of the SDK does not know).
    public var ringMode: RingMode? { mode.flatMap(RingMode.init(rawValue:)) }

    /// For a ring group, every identity rung, in the order the caller named them, with where each
    /// stands; empty for a call to one identity (``to`` and ``state`` say it all).
    public var ringGroup: [CallParticipant] { (participants ?? []).map(CallParticipant.init) }
}
