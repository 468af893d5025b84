import Foundation

/// What a ``RingRelayClient`` needs for sealed calls: this device's identity and key, and the two
/// files that outlive a launch.
public struct SealedCallConfiguration: Sendable {
    /// This device: account, identity, device and key.
    public var identity: SealedCallIdentity
    /// The invites opened on this device: the same file the Notification Service Extension uses.
    public var replayStore: InviteReplayStore
    /// The callees' keys sealed to before (trust on first use).
    public var knownKeys: KnownDeviceKeys
    /// How long an invite this device seals stays valid: the ring timeout (45 s by default) and
    /// some room for the two devices' clocks to differ. At most
    /// ``SealedInviteOpener/maximumLifetime`` (5 minutes) is used: callees refuse longer.
    public var inviteLifetime: Duration
    /// Told when a callee's device keys differ from those sealed to before, before the call is
    /// placed; show it to the user.
    public var onDeviceKeysChanged: @Sendable (DeviceKeyChange) -> Void

    /// Creates a configuration.
    public init(
        identity: SealedCallIdentity, replayStore: InviteReplayStore, knownKeys: KnownDeviceKeys, inviteLifetime: Duration = .seconds(75),
        onDeviceKeysChanged: @escaping @Sendable (DeviceKeyChange) -> Void = { _ in }
    ) {
        self.identity = identity
        self.replayStore = replayStore
        self.knownKeys = knownKeys
        self.inviteLifetime = inviteLifetime
        self.onDeviceKeysChanged = onDeviceKeysChanged
    }
}
