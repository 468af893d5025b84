import Foundation
import Logging
import RingRelayCore

/// Sends one push to one binding through the right ``PushProvider`` and applies the outcome's
/// disposition: a dead token invalidates the binding, a credential problem is recorded once for
/// `/readyz`, a success clears it.
///
/// Ring deliveries (``RingExecutor``) and the test-push endpoint both go through here, so a binding
/// is treated the same whichever path pushed to it, and APNs and FCM share one path: credential
/// lookup, refusals, dispositions and logs are written once.
struct BindingPusher: Sendable {
    let store: any DataStore
    /// Push and provider credentials, cached for a few seconds.
    let credentials: CredentialCache
    let apns: APNsPushProvider
    let fcm: FCMPushProvider
    let faults: ConfigurationFaults
    let clock: any WallClock
    let logger: Logger

    /// What was pushed and what came of it.
    struct Result: Sendable {
        var outcome: PushOutcome
        var channel: PushChannel
        var kind: String
        /// The binding after the disposition was applied.
        var binding: Binding
    }

    /// What to send, in the form of the binding's channel.
    enum Payload: Sendable {
        /// An APNs push (VoIP or alert, by binding type).
        case apns(APNsPushProvider.Payload)
        /// An FCM message.
        case fcm(FCMPushProvider.Payload)

        /// A ring's APNs push: the body, held no longer than the ring.
        static func apns(_ body: [UInt8]) -> Payload { .apns(.init(body: body)) }
        /// A ring's FCM data message, held no longer than the ring.
        static func fcm(_ data: [String: String]) -> Payload { .fcm(.init(data: data)) }
    }

    /// Pushes `payload` to `binding`.
    ///
    /// - Parameters:
    ///   - payload: the content, in the binding's channel's form.
    ///   - deadline: no attempt starts after this; also the push's expiry.
    /// - Throws: ``RingRelayError`` when the account has no credential for the binding's channel,
    ///   or the payload is not for the binding's channel.
    func push(_ payload: Payload, to binding: Binding, deadline: Date) async throws -> Result {
        switch (payload, binding.type) {
        case (.apns(let push), .apnsVoIP), (.apns(let push), .apnsAlert):
            return try await self.push(push, to: binding, through: apns, deadline: deadline)
        case (.fcm(let message), .fcm):
            return try await self.push(message, to: binding, through: fcm, deadline: deadline)
        default:
            throw RingRelayError(
                .unprocessable, code: .channelNotSupported, "This payload cannot be pushed to a \(binding.type.rawValue) binding.")
        }
    }

    /// The one push path: the account's credential for the provider, the push, then its disposition.
    private func push<Provider: PushProvider>(
        _ payload: Provider.Payload, to binding: Binding, through provider: Provider, deadline: Date
    ) async throws -> Result {
        guard let stored = try await credentials.credential(provider.credentialKind, accountID: binding.accountID),
            let credential = provider.credential(in: stored)
        else { throw provider.notConfigured }
        let outcome: PushOutcome
        do {
            outcome = try await provider.push(payload, to: binding, credential: credential, deadline: deadline)
        } catch {
            outcome = PushOutcome(disposition: error.disposition, status: nil, reason: error.reason, providerID: nil, latency: .zero, attempts: 0)
            logger.warning("push refused before sending", metadata: ["binding.id": .string(binding.id), "push.reason": .string(error.description)])
        }
        let updated = try await apply(outcome, to: binding, channel: provider.channel)
        return Result(outcome: outcome, channel: provider.channel, kind: binding.type.pushKind, binding: updated)
    }

    /// Applies an outcome's disposition to the binding and the fault registry; returns the binding as it is now.
    func apply(_ outcome: PushOutcome, to binding: Binding, channel: PushChannel) async throws -> Binding {
        // Built only for a line that is logged: a delivered push's is at debug level, off by default.
        func metadata() -> Logger.Metadata {
            var metadata: Logger.Metadata = [
                "account.id": .string(binding.accountID), "binding.id": .string(binding.id), "push.channel": .string(channel.rawValue),
                "push.outcome": .string(outcome.disposition.metricName), "push.attempts": .stringConvertible(outcome.attempts),
            ]
            if let reason = outcome.reason { metadata["push.reason"] = .string(reason) }
            if let id = outcome.providerID { metadata["push.id"] = .string(id) }
            return metadata
        }
        switch outcome.disposition {
        case .delivered:
            faults.clear(accountID: binding.accountID, channel: channel)
            logger.debug("push delivered", metadata: metadata())
        case .invalidateBinding:
            let updated = try await store.invalidateBinding(
                id: binding.id, accountID: binding.accountID, reason: outcome.reason ?? "Invalid", at: clock.now,
                invalidSince: outcome.invalidSince)
            if updated?.status == .invalid {
                logger.info("binding invalidated", metadata: metadata())
            } else {
                logger.info("binding kept: token registered again after the push service's timestamp", metadata: metadata())
            }
            return updated ?? binding
        case .fixConfiguration:
            if faults.report(accountID: binding.accountID, channel: channel, reason: outcome.reason ?? "Unknown", at: clock.now) {
                logger.error("push credentials rejected; fix the account's credentials", metadata: metadata())
            }
        case .retry, .drop:
            logger.warning("push failed", metadata: metadata())
        }
        return binding
    }
}
