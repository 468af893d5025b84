import RingRelayWire

/// How a call this device places behaves where the account's defaults (`/v1/settings/calls`) would
/// otherwise decide: `nil` fields leave it to them.
///
/// ```swift
/// try await client.startCall(to: "bob", options: CallOptions(ifBusy: .reject, notifyMissed: true))
/// ```
public struct CallOptions: Sendable, Hashable {
    /// What a call to a callee already in a call does.
    public enum IfBusy: String, Sendable, Hashable, CaseIterable {
        /// Ring anyway, flagged `calleeBusy`: the callee's app offers call waiting.
        case ring
        /// Do not ring: the call ends at once, and the caller's SDK ends it as unanswered (busy).
        case reject
    }

    /// What to do when the callee is busy; the account's default when `nil`.
    public var ifBusy: IfBusy?
    /// Whether the callee's devices that never took the ring live get a "missed call" notification
    /// if it ends unanswered; the account's default when `nil`.
    public var notifyMissed: Bool?

    /// Creates options; by default every choice is the account's.
    public init(ifBusy: IfBusy? = nil, notifyMissed: Bool? = nil) {
        self.ifBusy = ifBusy
        self.notifyMissed = notifyMissed
    }
}
