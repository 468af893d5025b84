import Foundation
import Logging
import RingRelayAPNs
import RingRelayCore

/// Sends one push to one binding through the right channel and applies the outcome's
/// disposition: a dead token invalidates the binding, a credential problem is recorded once for
/// `/readyz`, a success clears it.
///
/// The delivery engine and the test-push endpoint both go through here, so a binding is treated
/// the same whichever path pushed to it.
struct BindingPusher: Sendable {
    let store: any DataStore
    let apns: APNsClient
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

    /// Pushes `payload` to `binding`.
    ///
    /// - Parameters:
    ///   - payload: the JSON body for the binding's channel.
    ///   - deadline: no attempt starts after this.
    /// - Throws: ``RingRelayError`` when the account has no credential for the binding's channel,
    ///   or the channel is not one this server can push to.
    func push(_ payload: [UInt8], to binding: Binding, deadline: Date) async throws -> Result {
        guard let kind = APNsPushKind(bindingType: binding.type) else {
            throw RingRelayError(
                .unprocessable, code: "channel_not_supported", "This server does not push to \(binding.type.rawValue) bindings yet.")
        }
        guard case .apns(let credential)? = try await store.credential(kind: .apns, accountID: binding.accountID)?.credential else {
            throw RingRelayError(
                .conflict, code: "apns_not_configured", "The account has no APNs credentials; upload them with PUT /v1/credentials/apns.")
        }
        let outcome: PushOutcome
        do {
            let request = try APNsRequest(
                kind: kind, bundleID: credential.topic, deviceToken: binding.token, payload: payload, expiresAt: deadline)
            outcome = await apns.push(
                request, credential: credential, environment: binding.environment ?? .production,
                environmentIsCertain: binding.environmentIsExplicit, deadline: deadline)
        } catch {
            outcome = PushOutcome(disposition: .drop, status: nil, reason: error.reason, providerID: nil, latency: .zero, attempts: 0)
            logger.warning("push refused before sending", metadata: ["binding.id": .string(binding.id), "push.reason": .string(error.description)])
        }
        let updated = try await apply(outcome, to: binding, channel: .apns)
        return Result(outcome: outcome, channel: .apns, kind: kind.rawValue, binding: updated)
    }

    private func apply(_ outcome: PushOutcome, to binding: Binding, channel: PushChannel) async throws -> Binding {
        var metadata: Logger.Metadata = [
            "account.id": .string(binding.accountID), "binding.id": .string(binding.id), "push.channel": .string(channel.rawValue),
            "push.outcome": .string(outcome.disposition.metricName), "push.attempts": .stringConvertible(outcome.attempts),
        ]
        if let reason = outcome.reason { metadata["push.reason"] = .string(reason) }
        if let id = outcome.providerID { metadata["push.id"] = .string(id) }
        switch outcome.disposition {
        case .delivered:
            faults.clear(accountID: binding.accountID, channel: channel)
            logger.debug("push delivered", metadata: metadata)
        case .invalidateBinding:
            let updated = try await store.invalidateBinding(
                id: binding.id, accountID: binding.accountID, reason: outcome.reason ?? "Invalid", at: clock.now,
                invalidSince: outcome.invalidSince)
            if updated?.status == .invalid {
                logger.info("binding invalidated", metadata: metadata)
            } else {
                logger.info("binding kept: token registered again after the push service's timestamp", metadata: metadata)
            }
            return updated ?? binding
        case .fixConfiguration:
            if faults.report(accountID: binding.accountID, channel: channel, reason: outcome.reason ?? "Unknown", at: clock.now) {
                logger.error("push credentials rejected; fix the account's credentials", metadata: metadata)
            }
        case .retry, .drop:
            logger.warning("push failed", metadata: metadata)
        }
        return binding
    }
}
