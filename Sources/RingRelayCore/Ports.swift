import Foundation
import RingRelayWire

/// Accounts and their API keys.
public protocol AccountStore: Sendable {
    /// Creates an account together with its first API key, atomically.
    /// - Throws: ``RingRelayError`` `account_name_taken` (conflict) when the name is in use.
    func createAccount(_ account: Account, firstKey: APIKeyRecord) async throws
    /// All accounts, oldest first.
    func listAccounts() async throws -> [Account]
    /// One account, or `nil`.
    func account(id: String) async throws -> Account?
    /// Deletes an account and everything it owns. Returns whether it existed.
    func deleteAccount(id: String) async throws -> Bool
    /// Adds a key to an existing account.
    func addKey(_ key: APIKeyRecord) async throws
    /// Revokes a key. Returns whether an unrevoked key with that id existed in the account.
    func revokeKey(accountID: String, keyID: String, at date: Date) async throws -> Bool
    /// The unrevoked key with this secret hash, or `nil`.
    func activeKey(secretHash: String) async throws -> APIKeyRecord?
    /// The account's call defaults (the built-in ones until it sets its own).
    func callDefaults(accountID: String) async throws -> CallDefaults
    /// Replaces the account's call defaults.
    func setCallDefaults(_ defaults: CallDefaults, accountID: String) async throws
    /// The operator's settings for the account (``AccountLimits/serverDefaults`` until set).
    func accountLimits(accountID: String) async throws -> AccountLimits
    /// Replaces the operator's settings for the account.
    func setAccountLimits(_ limits: AccountLimits, accountID: String) async throws
}

/// What a registration may add to its identity and account (``BindingStore/upsertBinding(_:newID:now:room:)``).
public struct BindingRoom: Sendable, Hashable {
    /// Most active bindings an identity may have: a binding that would make its identity's one
    /// more is refused.
    public var perIdentity: Int
    /// Whether the account may have one more binding: when not, only a token it has already is
    /// registered.
    public var accountHasRoom: Bool

    public init(perIdentity: Int, accountHasRoom: Bool) {
        self.perIdentity = perIdentity
        self.accountHasRoom = accountHasRoom
    }

    /// No limit (tests, tools).
    public static let unlimited = BindingRoom(perIdentity: .max, accountHasRoom: true)
}

extension BindingStore {
    /// Registers without limits; a store that refuses anyway is a defect.
    public func upsertBinding(_ registration: BindingRegistration, newID: String, now: Date) async throws -> BindingUpsert {
        guard let upsert = try await upsertBinding(registration, newID: newID, now: now, room: .unlimited) else {
            throw RingRelayError(.internal, code: .storeError, "The binding upsert returned no row.")
        }
        return upsert
    }
}

/// Device bindings.
public protocol BindingStore: Sendable {
    /// Creates a binding, or updates the one with the same `(account, type, token)`: the token moves to
    /// the new identity and becomes active again; within `room`, in one statement.
    /// - Parameters:
    ///   - registration: validated input.
    ///   - newID: the id to use if the binding is created.
    ///   - now: the registration time.
    ///   - room: what the registration may add. Re-registering an active binding of the same
    ///     identity always goes through.
    /// - Returns: the binding, or `nil` when it would pass `room` (nothing changed).
    func upsertBinding(_ registration: BindingRegistration, newID: String, now: Date, room: BindingRoom) async throws -> BindingUpsert?
    /// How many bindings the account has, whatever their status.
    func bindingCount(accountID: String) async throws -> Int
    /// One binding of the account, optionally only if it belongs to `identity`.
    func binding(id: String, accountID: String, identity: String?) async throws -> Binding?
    /// A page of the account's bindings in id (creation) order.
    func listBindings(accountID: String, query: BindingQuery) async throws -> Page<Binding>
    /// The active bindings of `identity`, in id order: what a ring pushes to.
    ///
    /// Rings read this on every call, so a store may answer from memory; it must forget what it
    /// holds whenever a binding of the account changes through it.
    func activeBindings(accountID: String, identity: String) async throws -> [Binding]
    /// Deletes one binding, optionally only if it belongs to `identity`. Returns whether it existed.
    func deleteBinding(id: String, accountID: String, identity: String?) async throws -> Bool
    /// Deletes every binding of an identity. Returns how many there were.
    func deleteBindings(accountID: String, identity: String) async throws -> Int
    /// Marks a binding invalid because the push service reported its token dead.
    ///
    /// - Parameters:
    ///   - reason: the service's reason, verbatim.
    ///   - invalidSince: when the service says the token stopped being valid (APNs' 410
    ///     `timestamp`); when given, a binding registered after it is left active, because the app
    ///     has registered the token again since.
    /// - Returns: the binding as it is now, or `nil` when it no longer exists.
    func invalidateBinding(id: String, accountID: String, reason: String, at date: Date, invalidSince: Date?) async throws -> Binding?
    /// Counts of all bindings by type and status, across accounts.
    func bindingCounts() async throws -> [BindingCount]
    /// Records that devices of an identity were signed out at `date` (their last binding was
    /// removed): access tokens issued to them before then stop working. `deviceIDs` `nil`: every
    /// device of the identity.
    func signOutDevices(accountID: String, identity: String, deviceIDs: [String]?, at date: Date) async throws
    /// When a device was last signed out, on its own or with its whole identity; `nil` if never
    /// (or not since ``forgetSignOuts(before:)``).
    func signedOut(accountID: String, identity: String, deviceID: String) async throws -> Date?
    /// Forgets sign-outs before `date` (no token issued before then is still valid). Returns how many.
    func forgetSignOuts(before date: Date) async throws -> Int
}

/// Push and provider credentials, one per kind per account.
public protocol CredentialStore: Sendable {
    /// Stores (or replaces) a credential.
    func putCredential(_ credential: Credential, accountID: String, at date: Date) async throws
    /// All credentials of an account.
    func credentials(accountID: String) async throws -> [StoredCredential]
    /// One credential, or `nil`.
    func credential(kind: CredentialKind, accountID: String) async throws -> StoredCredential?
    /// Deletes a credential. Returns whether it existed.
    func deleteCredential(kind: CredentialKind, accountID: String) async throws -> Bool
}

/// Small server-wide values: signing keys and one-time bootstrap markers.
public protocol SettingsStore: Sendable {
    /// The value stored under `name`; if none, stores `makeValue()` and returns it (first writer wins).
    func setting(named name: String, orInsert makeValue: @Sendable () -> Data) async throws -> Data
}

/// Everything the server needs from storage, with the same semantics in each engine:
/// `SQLiteStore` (RingRelayStore, one process on one file) and `PostgresStore`
/// (RingRelayPostgres, any number of instances on one database).
public protocol DataStore: AccountStore, BindingStore, CredentialStore, SettingsStore, CallStore {
    /// Throws when the store cannot be reached; backs `/readyz`.
    func ping() async throws
    /// Writes what the store holds back (delivery records) and releases the database. Later
    /// calls fail with `store_closed`; closing twice is harmless.
    func close() async throws
    /// How long the request first in line for the database has waited so far (zero when none
    /// waits): past a fraction of a second the store cannot keep up, and new calls are refused
    /// rather than accepted and left to ring late.
    var queueDelay: Duration { get }
}

extension DataStore {
    /// A store that serves each request as it comes (SQLite's one writer waits inside it) has no
    /// line to measure.
    public var queueDelay: Duration { .zero }
}

/// What one instance tells the others that share its database, so that their caches and live
/// connections follow a change made through it.
public enum ClusterNotice: Sendable, Hashable, Codable {
    /// A push or provider credential of the account was stored or deleted.
    case credentialsChanged(accountID: String, kind: CredentialKind)
    /// The account was deleted: its devices' live connections end, its cached credentials go.
    case accountDeleted(accountID: String)
    /// An operator changed the account's ``AccountLimits``: cached ones go.
    case limitsChanged(accountID: String)
    /// Devices of an identity lost their last binding (`deviceIDs`), or every binding of the
    /// identity was deleted (`nil`): their live connections end.
    case devicesUnbound(accountID: String, identity: String, deviceIDs: [String]?)
    /// A call changed to `version`: its devices connected to other instances get these events
    /// (the call as it is now is read from the store; the version names the events, so every
    /// instance gives a device's event the same id).
    case callEvents(accountID: String, callID: String, version: Int, events: [PlannedEvent])
    /// The device's connection is now held by `instance`: the others forget the events they kept
    /// for it (it took them over) and stop sending it its calls' events.
    case deviceMoved(LiveDeviceAddress, instance: String)
    /// Ring a device connected to the `target` instance, for the `origin` instance's ring.
    case ring(RemoteRing)
    /// The device acknowledged the ring `ringID` the `origin` instance asked for.
    case ringAcknowledged(ringID: String, origin: String)
    /// The `target` instance did not send the ring `ringID`, for `reason`
    /// (``RemoteRing/notConnected`` or ``RemoteRing/ringEnded``), so the origin need not wait
    /// out its window.
    case ringRefused(ringID: String, origin: String, reason: String)
}

extension ClusterNotice {
    /// The one instance the notice is for (a relayed ring, and its answer); `nil` for all.
    public var addressee: String? {
        switch self {
        case .ring(let ring): ring.target
        case .ringAcknowledged(_, let origin), .ringRefused(_, let origin, _): origin
        case .credentialsChanged, .accountDeleted, .limitsChanged, .devicesUnbound, .callEvents, .deviceMoved: nil
        }
    }
}

/// A ring one instance asks the instance holding the device's connection to send.
public struct RemoteRing: Sendable, Hashable, Codable {
    /// Names the ring between the two instances.
    public var ringID: String
    /// The instance whose ring it is.
    public var origin: String
    /// The instance holding the device's connection.
    public var target: String
    /// The device.
    public var device: LiveDeviceAddress
    /// The call (read from the store by the target).
    public var callID: String
    /// `call.incoming` or `call.notification`.
    public var event: CallEventType
    /// Whether the callee is in another call.
    public var calleeBusy: Bool
    /// For provider calls, the provider; its payload, verbatim.
    public var provider: CallSource?
    public var payload: String?
    /// For a sealed call, the device's box.
    public var sealed: String?
    /// How long the origin waits for the acknowledgement, in milliseconds.
    public var ackWindowMilliseconds: Int

    /// Why a ring was refused: the device is no longer connected to the target.
    public static let notConnected = "not_connected"
    /// Why a ring was refused: the call no longer rings the device's identity.
    public static let ringEnded = "ring_ended"

    /// Creates a ring request.
    public init(
        ringID: String, origin: String, target: String, device: LiveDeviceAddress, callID: String, event: CallEventType, calleeBusy: Bool,
        provider: CallSource?, payload: String?, sealed: String?, ackWindowMilliseconds: Int
    ) {
        self.ringID = ringID
        self.origin = origin
        self.target = target
        self.device = device
        self.callID = callID
        self.event = event
        self.calleeBusy = calleeBusy
        self.provider = provider
        self.payload = payload
        self.sealed = sealed
        self.ackWindowMilliseconds = ackWindowMilliseconds
    }
}

/// What a ``ClusterBus`` delivers.
public enum ClusterDelivery: Sendable, Hashable {
    /// Another instance's notice.
    case notice(ClusterNotice)
    /// Notices may have been missed (the connection to the bus was lost and is back): whatever
    /// they would have corrected must be checked afresh.
    case resynchronize
}

/// How instances sharing a database tell each other of changes: a port, so a deployment beyond
/// what its database's notifications carry can move to a dedicated bus.
///
/// Delivery is at most once and only to instances listening at the time; a listener that may
/// have missed notices is told so (``ClusterDelivery/resynchronize``). An instance never hears
/// its own notices: it applies them itself.
public protocol ClusterBus: Sendable {
    /// Whether other instances may be listening: when not, nothing needs to be published.
    var hasPeers: Bool { get }
    /// Sends `notice` to the other instances.
    func publish(_ notice: ClusterNotice) async throws
    /// Sends `notices` to the other instances, in order, in as few round trips as the bus allows.
    func publish(contentsOf notices: [ClusterNotice]) async throws
    /// Hands the other instances' notices to `receive`, in the order they were published, until
    /// the task is cancelled; reconnects by itself, then delivers ``ClusterDelivery/resynchronize``.
    func listen(_ receive: @escaping @Sendable (ClusterDelivery) async -> Void) async throws
    /// How far behind the bus runs: the age of the oldest notice this instance published that has
    /// not yet come back to its own listener (zero when none is outstanding, or while it is not
    /// listening). A ring relayed to another instance travels this same way, so past a fraction of
    /// its acknowledgement window, relayed rings arrive too late.
    var lag: Duration { get }
}

extension ClusterBus {
    /// A bus with nobody to tell never falls behind.
    public var lag: Duration { .zero }

    /// One notice after the other.
    public func publish(contentsOf notices: [ClusterNotice]) async throws {
        for notice in notices { try await publish(notice) }
    }
}

/// One device's live connection, as the instances sharing a store find it.
public struct LiveDeviceAddress: Sendable, Hashable, Codable {
    public var accountID: String
    public var identity: String
    public var deviceID: String

    /// Creates an address.
    public init(accountID: String, identity: String, deviceID: String) {
        self.accountID = accountID
        self.identity = identity
        self.deviceID = deviceID
    }
}

/// Which instance holds which device's live connection, for instances sharing a store: a ring
/// reaches a device connected to another instance through that instance.
public protocol LiveDirectory: Sendable {
    /// This instance, as the directory (and the bus) name it.
    var instanceID: String { get }
    /// Records that this instance holds `device`'s connection number `connection`.
    func connected(_ device: LiveDeviceAddress, connection: UInt64) async throws
    /// Forgets that connection, unless a newer one (here or on another instance) replaced it.
    func disconnected(_ device: LiveDeviceAddress, connection: UInt64) async throws
    /// The identity's devices connected to other instances that are alive: device id → instance id.
    func remoteDevices(accountID: String, identity: String) async throws -> [String: String]
    /// Marks this instance alive. An instance silent for a few seconds (it died) is left out of
    /// ``remoteDevices(accountID:identity:)``, and its records are removed later.
    func heartbeat() async throws
    /// Removes this instance and its devices (a graceful shutdown).
    func leave() async throws

    /// Keeps events this instance holds for devices until they are acknowledged, where every
    /// instance can read them (an event already kept is left as it is).
    func keepEvents(_ events: [KeptLiveEvent]) async throws
    /// Marks events settled: acknowledged by their device, or withdrawn (a ring whose call
    /// stopped ringing). A settled event is not sent again, but tells which calls a device was in.
    func settleEvents(_ eventIDs: [String]) async throws
    /// Takes over the events other instances keep for `device` (it connected here): returns them
    /// oldest first, acknowledged or not, and keeps them as this instance's from now on.
    func takeOverEvents(of device: LiveDeviceAddress) async throws -> [KeptLiveEvent]
}

/// An event kept for a device until it is acknowledged (see ``LiveDirectory/keepEvents(_:)``).
public struct KeptLiveEvent: Sendable, Hashable, Codable {
    public var eventID: String
    public var device: LiveDeviceAddress
    public var callID: String
    public var kind: CallEventType
    /// The frame, as sent.
    public var text: String
    public var expiresAt: Date
    public var acknowledged: Bool

    /// Creates a kept event.
    public init(
        eventID: String, device: LiveDeviceAddress, callID: String, kind: CallEventType, text: String, expiresAt: Date, acknowledged: Bool = false
    ) {
        self.eventID = eventID
        self.device = device
        self.callID = callID
        self.kind = kind
        self.text = text
        self.expiresAt = expiresAt
        self.acknowledged = acknowledged
    }
}

/// What instances sharing a store need of each other: the bus and the directory.
public typealias Cluster = ClusterBus & LiveDirectory

/// The bus of a server that shares its store with nobody (the SQLite file): nothing to tell, and
/// every device it can reach is its own.
public struct SingleInstanceBus: Cluster {
    /// Creates the bus.
    public init() {}

    public var instanceID: String { "single" }
    public var hasPeers: Bool { false }
    public func connected(_ device: LiveDeviceAddress, connection: UInt64) async throws {}
    public func disconnected(_ device: LiveDeviceAddress, connection: UInt64) async throws {}
    public func remoteDevices(accountID: String, identity: String) async throws -> [String: String] { [:] }
    public func heartbeat() async throws {}
    public func leave() async throws {}
    public func keepEvents(_ events: [KeptLiveEvent]) async throws {}
    public func settleEvents(_ eventIDs: [String]) async throws {}
    public func takeOverEvents(of device: LiveDeviceAddress) async throws -> [KeptLiveEvent] { [] }

    public func publish(_ notice: ClusterNotice) async throws {}

    public func listen(_ receive: @escaping @Sendable (ClusterDelivery) async -> Void) async throws {
        // Nobody else publishes: wait for the end of the server (a cancelled sleep throws).
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
