import ArgumentParser
import Foundation
import NIOHTTP1
import RingRelayServer
import RingRelayWire

/// `ringrelay webhook twilio|webex`: a test webhook, signed as the platform signs it, so a ring
/// from Twilio or Webex can be tried without either platform and without writing HMAC code.
///
/// The server keeps webhook secrets write-only (no API gives them back), so the verb signs with
/// the same secret taken from the environment, never from the command line, where `ps` shows it.
struct WebhookCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhook", abstract: "Send a signed test webhook, as Twilio or Webex would, to ring an identity.",
        subcommands: [Twilio.self, Webex.self])

    /// What both providers' verbs take.
    struct Target: ParsableArguments {
        @OptionGroup var options: ServerOptions
        @Option(help: "The RingRelay account (acc_…) whose webhook URL to call: /v1/webhooks/<provider>/<account>.") var account: String
        @Option(help: "The identity to ring.") var to: String
    }

    struct Twilio: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a Twilio Call Notification webhook, signed with the account's Twilio auth token.",
            discussion: """
                The auth token comes from RINGRELAY_TWILIO_AUTH_TOKEN: the one uploaded with PUT /v1/credentials/twilio \
                (the server never gives it back). The account SID comes from --account-sid, or else from \
                GET /v1/credentials with the account API key (--token or RINGRELAY_TOKEN). Exits 0 when the server \
                rang the identity, 1 when it answered an error (404 no_reachable_device: nothing to ring).
                """)
        @OptionGroup var target: Target
        @Option(help: "The caller, as twi_from.") var from = "client:alice"
        @Option(help: "The Twilio account SID (AC…); by default the one the account configured.") var accountSid: String?

        func run() async throws {
            let authToken = try secret("RINGRELAY_TWILIO_AUTH_TOKEN", "the Twilio auth token uploaded with PUT /v1/credentials/twilio")
            try await reportingAPIErrors(signedWith: "RINGRELAY_TWILIO_AUTH_TOKEN") {
                let sid: String
                if let accountSid { sid = accountSid } else { sid = try await configuredAccountSID() }
                let body = try JSONSerialization.data(
                    withJSONObject: [
                        "twi_account_sid": sid, "twi_bridge_token": "ringrelay-test-webhook", "twi_call_sid": "CA" + randomHex(),
                        "twi_from": from, "twi_message_id": "WB" + randomHex(), "twi_message_type": "twilio.voice.call",
                        "twi_to": "client:" + target.to,
                    ], options: [.sortedKeys])
                let server = try target.options.baseURL()
                let path = "/v1/webhooks/twilio/\(target.account.urlEncoded)"
                let signed = TwilioSignature.signingJSON(Array(body), url: server + path, authToken: authToken)
                let signedPath = String(signed.url.dropFirst(server.count))  // the path with bodySHA256 added
                let answer = try await APIClient(baseURL: server, token: nil).send(
                    .POST, signedPath, json: body, headers: ["X-Twilio-Signature": signed.signature])
                try report(answer, json: target.options.json)
            }
        }

        /// The account's Twilio SID, which `GET /v1/credentials` shows (it is not a secret).
        private func configuredAccountSID() async throws -> String {
            let client = try target.options.client(tokenVariables: BindingsCommand.tokenVariables)
            guard let sid = try await client.send(.GET, "/v1/credentials", as: CredentialsResource.self).0.twilio?.accountSid else {
                throw ValidationError("The account has no Twilio credentials: upload them with PUT /v1/credentials/twilio, or pass --account-sid.")
            }
            return sid
        }
    }

    struct Webex: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a Webex telephony_push webhook, signed with the account's Webex webhook secret.",
            discussion: """
                The secret comes from RINGRELAY_WEBEX_SECRET: the one uploaded with PUT /v1/credentials/webex (the \
                server never gives it back). --to is the callee's Webex person id, the identity its devices are bound \
                to. The apnsPayload and fcmPayload are placeholders: Webex's own keys are not public. Exits 0 when the \
                server rang the identity, 1 when it answered an error.
                """)
        @OptionGroup var target: Target

        func run() async throws {
            let secret = try secret("RINGRELAY_WEBEX_SECRET", "the Webex webhook secret uploaded with PUT /v1/credentials/webex")
            try await reportingAPIErrors(signedWith: "RINGRELAY_WEBEX_SECRET") {
                let now = Date().formatted(.iso8601)
                let payload = ["sentBy": "ringrelay webhook webex", "sentAt": now]
                // A fresh id and time make each test a new call: the server rings a repeated body once.
                let body = try JSONSerialization.data(
                    withJSONObject: [
                        "id": "ringrelay-test-" + randomHex(), "name": "RingRelay test webhook", "resource": "telephony_push",
                        "event": "updated", "status": "active", "created": now, "actorId": target.to,
                        "data": ["apnsPayload": payload, "fcmPayload": payload],
                    ] as [String: Any], options: [.sortedKeys])
                let answer = try await APIClient(baseURL: try target.options.baseURL(), token: nil).send(
                    .POST, "/v1/webhooks/webex/\(target.account.urlEncoded)", json: body,
                    headers: ["X-Spark-Signature": WebexSignature.signature(of: Array(body), secret: secret)])
                try report(answer, json: target.options.json)
            }
        }
    }
}

/// A webhook secret from `variable`: from the environment only, so that `ps` never shows it.
private func secret(_ variable: String, _ what: String) throws -> String {
    guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
        throw ValidationError("Set \(variable) to \(what).")
    }
    return value
}

/// ``reportingAPIErrors(_:)``, with a hint at the secret when the server refuses the signature.
private func reportingAPIErrors(signedWith variable: String, _ body: () async throws -> Void) async throws {
    try await reportingAPIErrors {
        do {
            try await body()
        } catch var error as APIError where error.code == "invalid_signature" {
            error.message += " Check that \(variable) holds the secret the account uploaded, and --account is that account."
            throw error
        }
    }
}

/// 32 random hex digits, the shape of Twilio's ids after their two-letter prefix.
private func randomHex() -> String {
    (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}

/// Prints the server's answer to a webhook: the call and each device's first answer.
private func report(_ answer: Data, json: Bool) throws {
    if json { return printJSON(answer) }
    let rang = try JSONDecoder.ringRelay.decode(WebhookRingResponse.self, from: answer)
    print("Rang: call \(rang.callId), \(rang.deliveries.count) device(s).")
    for delivery in rang.deliveries {
        let device = delivery.deviceId ?? delivery.bindingId ?? "-"
        let status = delivery.status.map { ", status \($0)" } ?? ""
        print("  \(delivery.channel) \(delivery.kind) to \(device): \(delivery.outcome)\(status)\(delivery.reason.map { ", \($0)" } ?? "")")
    }
}
