import Foundation
import Synchronization

/// Credential and configuration problems the push services reported, per account and channel.
///
/// A bad key fails every push of an account; the fault is recorded once (the first report returns
/// `true`, so the caller logs once, not per push), shown in `/readyz`, and cleared by the next
/// success or by uploading new credentials.
public final class ConfigurationFaults: Sendable {
    /// One recorded fault.
    public struct Fault: Sendable, Hashable {
        /// The account whose credentials are at fault.
        public var accountID: String
        /// The channel that reported it.
        public var channel: PushChannel
        /// The push service's reason, e.g. `InvalidProviderToken`.
        public var reason: String
        /// When it was first reported.
        public var since: Date
    }

    private struct Key: Hashable {
        var accountID: String
        var channel: PushChannel
    }

    private let faults = Mutex<[Key: Fault]>([:])

    /// Creates an empty registry.
    public init() {}

    /// Records a fault. Returns `true` when it is new (or its reason changed): log it then.
    @discardableResult
    public func report(accountID: String, channel: PushChannel, reason: String, at date: Date) -> Bool {
        faults.withLock { faults in
            let key = Key(accountID: accountID, channel: channel)
            if faults[key]?.reason == reason { return false }
            faults[key] = Fault(accountID: accountID, channel: channel, reason: reason, since: date)
            return true
        }
    }

    /// Clears the fault of an account's channel (after a success or new credentials).
    public func clear(accountID: String, channel: PushChannel) {
        _ = faults.withLock { $0.removeValue(forKey: Key(accountID: accountID, channel: channel)) }
    }

    /// Clears every fault of an account (when it is deleted).
    public func clear(accountID: String) {
        faults.withLock { faults in faults = faults.filter { $0.key.accountID != accountID } }
    }

    /// Every current fault, oldest first.
    public var all: [Fault] {
        faults.withLock { Array($0.values) }.sorted { ($0.since, $0.accountID) < ($1.since, $1.accountID) }
    }
}
