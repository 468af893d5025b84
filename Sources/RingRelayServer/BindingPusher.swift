import Foundation
import Logging
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM

/// Sends one push to one binding through the right channel and applies the outcome's
/// disposition: a dead token invalidates the binding, a credential problem is recorded once for
/// `/readyz`, a success clears it.
///
/// The delivery engine and the test-push endpoint both go through here, so a binding is treated
/// the same whichever path pushed to it.
struct BindingPusher: Sendable {
    let store: any DataStore
    /// Push and provider credentials, cached for a few seconds.
    let credentials: CredentialCache
    let apns: APNsClient
    let fcm: FCMClient
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
        /// The JSON body of an APNs push (VoIP or alert, by binding type).
        case apns([UInt8])
        /// The data of an FCM data message; every value a string.
        case fcm([String: String])
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
        case (.apns(let bytes), .apnsVoIP), (.apns(let bytes), .apnsAlert):
            return try await pushAPNs(bytes, to: binding, deadline: deadline)
        case (.fcm(let data), .fcm):
            return try await pushFCM(data, to: binding, deadline: deadline)
        default:
            throw RingRelayError(
                .unprocessable, code: "channel_not_supported", "This payload cannot be pushed to a \(binding.type.rawValue) binding.")
        }
    }

    private func pushFCM(_ data: [String: String], to binding: Binding, deadline: Date) async throws -> Result {
        guard case .fcm(let credential)? = try await credentials.credential(.fcm, accountID: binding.accountID) else {
            throw RingRelayError(
                .conflict, code: "fcm_not_configured", "The account has no FCM service account; upload it with PUT /v1/credentials/fcm.")
        }
        let outcome: PushOutcome
        do {
            // android.ttl is the ring time left, so FCM drops a message that would arrive after the call.
            let request = try FCMRequest(token: binding.token, data: data, expiresAt: deadline, now: clock.now)
            outcome = await fcm.push(request, credential: credential, deadline: deadline)
        } catch {
            outcome = PushOutcome(disposition: .drop, status: nil, reason: error.reason, providerID: nil, latency: .zero, attempts: 0)
            logger.warning("push refused before sending", metadata: ["binding.id": .string(binding.id), "push.reason": .string(error.description)])
        }
        let updated = try await apply(outcome, to: binding, channel: .fcm)
        return Result(outcome: outcome, channel: .fcm, kind: FCMRequest.kind, binding: updated)
    }

    private func pushAPNs(_ payload: [UInt8], to binding: Binding, deadline: Date) async throws -> Result {
        guard let kind = APNsPushKind(bindingType: binding.type) else {
            throw RingRelayError(.internal, code: "internal_error", "Not an APNs binding.")
        }
        guard case .apns(let credential)? = try await credentials.credential(.apns, accountID: binding.accountID) else {
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

    /// Applies an outcome's disposition to the binding and the fault registry; returns the binding as it is now.
    func apply(_ outcome: PushOutcome, to binding: Binding, channel: PushChannel) async throws -> Binding {
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
