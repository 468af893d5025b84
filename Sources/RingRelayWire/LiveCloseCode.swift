/// Why the server closed a live connection: the WebSocket close code, and what a device should do.
///
/// | code | meaning | the device |
/// |---|---|---|
/// | 1001 | the server is shutting down | reconnects at once (another instance, or this one restarted) |
/// | 1008 | it stopped reading and the outbound budget filled | reconnects with back-off |
/// | 4001 | the same device connected again | stops: the newer connection is the device's |
/// | 4002 | its access token expired | fetches a fresh token and reconnects at once |
/// | 4003 | its account was deleted | stops |
/// | 4004 | its last binding was deleted (signed out) | stops |
public enum LiveCloseCode: UInt16, Sendable, Hashable, CaseIterable {
    case goingAway = 1001
    case policyViolation = 1008
    case replaced = 4001
    case tokenExpired = 4002
    case accountDeleted = 4003
    case deviceUnbound = 4004

    /// The close frame's reason text.
    public var reason: String {
        switch self {
        case .goingAway: "server shutting down"
        case .policyViolation: "the device is not reading: outbound budget exceeded"
        case .replaced: "replaced"
        case .tokenExpired: "token_expired"
        case .accountDeleted: "account_deleted"
        case .deviceUnbound: "device_unbound"
        }
    }

    /// Whether a device should connect again after this close.
    public var allowsReconnect: Bool {
        switch self {
        case .goingAway, .policyViolation, .tokenExpired: true
        case .replaced, .accountDeleted, .deviceUnbound: false
        }
    }
}
