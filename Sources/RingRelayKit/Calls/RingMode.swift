/// How a call to several identities at once (a ring group) rings.
///
/// ```swift
/// let call = try await client.startCall(to: ["bob", "carol", "dave"], mode: .all)
/// ```
public enum RingMode: String, Sendable, Hashable, CaseIterable {
    /// A hunt group: every identity rings, the first to answer gets the call, and every other
    /// device stops ringing (answered elsewhere).
    case first
    /// Everyone is invited: each identity joins on its own while the rest ring on until the ring
    /// timeout. The call ends when the caller hangs up or the last one in it leaves.
    case all
}
