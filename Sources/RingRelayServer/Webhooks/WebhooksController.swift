import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import RingRelayCore
import RingRelayWire

/// `/v1/webhooks/{provider}/{accountId}`: Twilio's Call Notification and Webex's
/// `telephony_push` webhooks, verified by their signatures, ringing the callee's devices.
struct WebhooksController {
    /// The providers' webhook credentials, cached for a few seconds.
    let credentials: CredentialCache
    let ringer: Ringer
    /// Provider webhooks per account: a budget of their own, so calls cannot exhaust it.
    let limiter: RateLimiter
    /// The operator's settings of each account: its budget and its provider calls' ring time.
    let limits: AccountLimitsCache
    let metrics: ServerMetrics
    /// Largest request body accepted.
    let maxBodyBytes: Int
    /// Whether `X-Forwarded-Proto` and `X-Forwarded-Host` name the URL the provider signed (`--trust-proxy`).
    let trustProxy: Bool
    /// Rejections of unsigned or mis-signed posts, logged at most once a minute per cause.
    let rejections: RateLimitedLog

    func register(on router: Router<RingRelayRequestContext>) {
        router.post("/v1/webhooks/twilio/:accountId") { request, context in
            try await recorded("twilio", context) { try await twilio(request, context) }
        }
        router.post("/v1/webhooks/webex/:accountId") { request, context in
            try await recorded("webex", context) { try await webex(request, context) }
        }
    }

    /// Counts every webhook by provider and result, whatever happens.
    private func recorded(_ provider: String, _ context: RingRelayRequestContext, _ body: () async throws -> Response) async throws -> Response {
        do {
            let response = try await body()
            metrics.recordWebhook(provider: provider, status: Int(response.status.code))
            return response
        } catch {
            metrics.recordWebhook(provider: provider, status: Int(ErrorMiddleware.status(of: ErrorMiddleware.map(error).kind).code))
            throw error
        }
    }

    // MARK: Twilio

    func twilio(_ request: Request, _ context: RingRelayRequestContext) async throws -> Response {
        let accountID = try self.accountID(context)
        let body = try await rawBody(request)
        guard case .twilio(let credential)? = try await credentials.credential(.twilio, accountID: accountID) else {
            rejections.warning(
                "Twilio webhook for an account without Twilio credentials", metadata: ["account.id": .string(accountID)], logger: context.logger)
            throw Self.badSignature
        }
        guard let signature = request.headers[.twilioSignature] else {
            throw RingRelayError(.forbidden, code: .missingSignature, "The X-Twilio-Signature header is missing.")
        }
        let isForm = request.headers[.contentType].map { $0.lowercased().hasPrefix("application/x-www-form-urlencoded") } ?? false
        let form = isForm ? TwilioSignature.formFields(body) : nil
        let url = publicURL(of: request)
        guard TwilioSignature.isValid(signature: signature, url: url, body: body, form: form, authToken: credential.authToken) else {
            rejections.warning("Twilio signature mismatch", metadata: ["account.id": .string(accountID)], logger: context.logger)
            throw Self.badSignature
        }
        // The notification's string members (and the names of any others), its bytes as devices
        // will get them, and as FCM data.
        let strings: [String: String]
        var others: Set<String> = []
        let json: [UInt8]
        let fcmData: [String: String]?
        if let form {
            var fields: [String: String] = [:]
            for (name, value) in form { fields[name] = value }
            strings = fields
            json = Self.jsonObject(sortedBy: fields)
            fcmData = fields
        } else if let members = try Self.stringMembers(body) {
            // Twilio's notifications are flat objects of strings: read in the one pass that checks them.
            strings = members
            json = body
            fcmData = members
        } else {
            // Valid JSON (stringMembers checked it) of another shape.
            let object = try Self.parsedObject(body)
            strings = object.compactMapValues { $0 as? String }
            others = Set(object.keys.filter { strings[$0] == nil })
            json = body
            fcmData = RawJSON.stringMap(object)
        }
        func field(_ name: String) throws(RingRelayError) -> String {
            guard let text = strings[name] else {
                throw others.contains(name) ? .invalidField(name, "must be a non-empty string.") : .missingField(name)
            }
            guard !text.isEmpty else { throw .invalidField(name, "must be a non-empty string.") }
            return text
        }
        let accountSID = try field("twi_account_sid")
        let to = try field("twi_to")
        let messageID = try field("twi_message_id")
        let messageType = strings["twi_message_type"] ?? "twilio.voice.call"
        guard Secrets.constantTimeEqual(accountSID, credential.accountSID) else {
            throw RingRelayError(.forbidden, code: .accountSIDMismatch, "twi_account_sid is not the Twilio account configured for this RingRelay account.")
        }
        guard messageType == "twilio.voice.call" else {
            // Cancellations are handled by Twilio's SDKs themselves; nothing to ring.
            return Response.json(status: .ok, WebhookIgnoredResponse(ignored: messageType))
        }
        let callee = to.hasPrefix("client:") ? String(to.dropFirst("client:".count)) : to
        try BindingRules.validateIdentity(callee, field: "twi_to")
        try await rateLimit(accountID)
        guard let voip = RawJSON.addingEmptyAPS(to: json[...]), let data = fcmData else {
            throw RingRelayError(.badRequest, code: .malformedJSON, "The body is not a JSON object.")
        }
        let result = try await ringer.ring(
            accountID: accountID, source: .twilio, externalID: messageID, caller: strings["twi_from"], callee: callee,
            content: RingContent(liveEvent: .notification, livePayload: json, apnsVoIP: voip, fcmData: data))
        return respond(result)
    }

    // MARK: Webex

    func webex(_ request: Request, _ context: RingRelayRequestContext) async throws -> Response {
        let accountID = try self.accountID(context)
        let body = try await rawBody(request)
        guard case .webex(let credential)? = try await credentials.credential(.webex, accountID: accountID) else {
            rejections.warning(
                "Webex webhook for an account without a Webex secret", metadata: ["account.id": .string(accountID)], logger: context.logger)
            throw Self.badSignature
        }
        guard let signature = request.headers[.sparkSignature] else {
            throw RingRelayError(.forbidden, code: .missingSignature, "The X-Spark-Signature header is missing.")
        }
        guard WebexSignature.isValid(signature: signature, body: body, secret: credential.secret) else {
            rejections.warning("Webex signature mismatch", metadata: ["account.id": .string(accountID)], logger: context.logger)
            throw Self.badSignature
        }
        let envelope = try Self.jsonObject(body)
        func field(_ name: String) throws(RingRelayError) -> String {
            guard let value = envelope[name] else { throw .missingField(name) }
            guard let text = value as? String, !text.isEmpty else { throw .invalidField(name, "must be a non-empty string.") }
            return text
        }
        let resource = try field("resource")
        let event = try field("event")
        guard resource == "telephony_push", event == "updated" else {
            return Response.json(status: .ok, WebhookIgnoredResponse(ignored: "\(resource)/\(event)"))
        }
        let actorID = try field("actorId")
        try BindingRules.validateIdentity(actorID, field: "actorId")
        guard envelope["data"] is [String: Any] else { throw RingRelayError.missingField("data") }
        // The payloads go to devices byte for byte, never re-serialised.
        let apns = RawJSON.value(at: ["data", "apnsPayload"], in: body)
        let fcm = RawJSON.value(at: ["data", "fcmPayload"], in: body)
        guard apns != nil || fcm != nil else { throw RingRelayError.missingField("data.apnsPayload") }
        var voip: [UInt8]?
        if let apns {
            guard let withAPS = RawJSON.addingEmptyAPS(to: apns) else {
                throw RingRelayError.invalidField("data.apnsPayload", "must be a JSON object.")
            }
            voip = withAPS
        }
        try await rateLimit(accountID)
        // Webex's notifications of one firehose share the webhook id; the body's hash tells a
        // repeated delivery from a new call.
        let result = try await ringer.ring(
            accountID: accountID, source: .webex, externalID: TwilioSignature.sha256Hex(body), caller: nil, callee: actorID,
            content: RingContent(
                liveEvent: .notification, livePayload: apns.map(Array.init) ?? fcm.map(Array.init), apnsVoIP: voip,
                fcmData: fcm.map { ["webhookTelephonyPush": String(decoding: $0, as: UTF8.self)] }))
        return respond(result)
    }

    // MARK: Shared

    private func respond(_ result: Ringer.Result) -> Response {
        if result.call.state == .unreachable {
            return Response.json(
                status: .notFound,
                ErrorBody(
                    code: RingRelayError.Code.noReachableDevice.rawValue,
                    message: "The identity '\(ClientText.echo(result.call.callee))' has no live connection and no active binding in this account."))
        }
        // As the calls API answers: the first page of deliveries, and where the rest are.
        let page = CallsController.firstPage(of: result.deliveries)
        return Response.json(
            status: .ok,
            WebhookRingResponse(callId: result.call.id, deliveries: page.deliveries.map(DeliveryResource.init), deliveriesNextCursor: page.nextCursor))
    }

    /// A form's fields as a JSON object of strings, its members in key order.
    static func jsonObject(sortedBy fields: [String: String]) -> [UInt8] {
        var out = JSONText(capacity: 64 + fields.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 6 })
        out.object { members in
            for (key, value) in fields.sorted(by: { $0.key < $1.key }) { members.member(key) { $0.string(value) } }
        }
        return Array(out.text.utf8)
    }

    /// The path's account id, refused before any lookup or log line when it is not shaped like
    /// one (answered as an unknown account is: the signature cannot match).
    private func accountID(_ context: RingRelayRequestContext) throws -> String {
        let accountID = context.parameters.value("accountId")
        guard ResourceID.isValid(accountID, prefix: ResourceID.account) else {
            rejections.warning("webhook for a path that is not an account id", metadata: [:], logger: context.logger)
            throw Self.badSignature
        }
        return accountID
    }

    private func rateLimit(_ accountID: String) async throws {
        let own = try await limits.limits(accountID)
        try limiter.take(accountID, tooMany: "requests for this account", rate: own.rateLimit, burst: own.rateLimitBurst)
    }

    private func rawBody(_ request: Request) async throws -> [UInt8] {
        let limit = maxBodyBytes
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit { throw Request.tooLarge(limit) }
        return Array(try await request.collectBody(maxBytes: limit).readableBytesView)
    }

    /// The URL as the provider requested it: the proxy's view when `--trust-proxy` is set.
    private func publicURL(of request: Request) -> String {
        var scheme = "http"
        var host = request.head.authority ?? "localhost"
        if trustProxy {
            if let proto = request.headers[.xForwardedProto]?.split(separator: ",").first {
                scheme = proto.trimmingCharacters(in: .whitespaces).lowercased()
            }
            if let forwarded = request.headers[.xForwardedHost]?.split(separator: ",").first {
                host = forwarded.trimmingCharacters(in: .whitespaces)
            }
        }
        return "\(scheme)://\(host)\(request.uri.description)"
    }

    /// The body's members when it is a JSON object of strings only, held to RFC 8259 as every request
    /// body is; `nil` when it is valid JSON of another shape.
    private static func stringMembers(_ body: [UInt8]) throws -> [String: String]? {
        guard !body.isEmpty else { throw RingRelayError(.badRequest, code: .emptyBody, "The request needs a JSON body.") }
        do {
            return try StrictJSON.stringMembers(body)
        } catch {
            throw RingRelayError(.badRequest, code: .malformedJSON, "The body is not valid JSON: \(error).")
        }
    }

    /// The body as a JSON object, held to RFC 8259 as every request body is, signed or not: with a
    /// member named twice, what is read here (JSONSerialization keeps one of them) and what the
    /// devices read in the payload bytes they get could differ.
    private static func jsonObject(_ body: [UInt8]) throws -> [String: Any] {
        guard !body.isEmpty else { throw RingRelayError(.badRequest, code: .emptyBody, "The request needs a JSON body.") }
        do {
            try StrictJSON.validate(body)
        } catch {
            throw RingRelayError(.badRequest, code: .malformedJSON, "The body is not valid JSON: \(error).")
        }
        return try parsedObject(body)
    }

    /// Strict JSON (checked already) as an object.
    private static func parsedObject(_ body: [UInt8]) throws -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw RingRelayError(.badRequest, code: .malformedJSON, "The body is not a JSON object.")
        }
        return object
    }

    static let badSignature = RingRelayError(
        .forbidden, code: .invalidSignature, "The request signature does not match this account's webhook credentials.")
}

extension HTTPField.Name {
    static let twilioSignature = Self("X-Twilio-Signature")!
    static let sparkSignature = Self("X-Spark-Signature")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
    static let xForwardedHost = Self("X-Forwarded-Host")!
}
