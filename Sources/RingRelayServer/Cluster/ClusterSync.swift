import Logging
import RingRelayCore
import ServiceLifecycle

/// Keeps this instance's caches and live connections in step with changes made through any
/// instance sharing its store.
///
/// Controllers ``announce(_:)`` what they changed: it is applied here at once and published on
/// the ``ClusterBus``; what other instances publish is applied as it arrives. After a gap in the
/// bus (``ClusterDelivery/resynchronize``) every cached credential is dropped and every live
/// connection whose account is gone is closed; a binding removal missed in the gap is not
/// recovered, and such a device's connection ends with its access token.
struct ClusterSync: Service {
    let bus: any ClusterBus
    let store: any DataStore
    let credentials: CredentialCache
    let faults: ConfigurationFaults
    let hub: LiveHub
    let logger: Logger

    /// Applies `notice` here and tells the other instances. A failure to tell them is logged, not
    /// thrown: the change is made, and the others' caches expire on their own.
    func announce(_ notice: ClusterNotice) async {
        apply(notice)
        do {
            try await bus.publish(notice)
        } catch {
            logger.warning("could not tell other instances of a change", metadata: ["error.cause": .string("\(error)")])
        }
    }

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await bus.listen { delivery in await self.receive(delivery) }
        }
    }

    private func receive(_ delivery: ClusterDelivery) async {
        switch delivery {
        case .notice(let notice):
            apply(notice)
        case .resynchronize:
            credentials.invalidateAll()
            for accountID in hub.connectedAccounts() {
                do {
                    if try await store.account(id: accountID) == nil { apply(.accountDeleted(accountID: accountID)) }
                } catch {
                    logger.warning("could not check an account after a bus gap", metadata: ["error.cause": .string("\(error)")])
                }
            }
        }
    }

    private func apply(_ notice: ClusterNotice) {
        switch notice {
        case .credentialsChanged(let accountID, let kind):
            credentials.invalidate(accountID: accountID)
            if let channel = PushChannel(rawValue: kind.rawValue) { faults.clear(accountID: accountID, channel: channel) }
        case .accountDeleted(let accountID):
            faults.clear(accountID: accountID)
            credentials.invalidate(accountID: accountID)
            hub.closeAccount(accountID)
        case .devicesUnbound(let accountID, let identity, let deviceIDs):
            hub.closeUnbound(accountID: accountID, identity: identity, deviceIDs: deviceIDs.map(Set.init))
        }
    }
}
