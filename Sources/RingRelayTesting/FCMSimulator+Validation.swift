import Foundation
import RingRelayCore
import Synchronization
import _CryptoExtras

/// FCM's and Google OAuth's rules as the simulator applies them (FCM HTTP v1 `messages:send`, Google's
/// JWT-bearer token exchange).
enum FCMRules {
    static let tokenPath = "/token"
    static let sendPathPrefix = "/v1/projects/"
    static let sendPathSuffix = "/messages:send"
    static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    /// Scopes that allow sending: FCM's own and cloud-platform.
    static let sendScopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// Longest assertion lifetime Google accepts.
    static let maximumAssertionLifetime: Int64 = 3600
    /// How far in the future an assertion's `iat` may be (clock skew).
    static let assertionFutureSkew: Int64 = 60
    /// Data payload limit of token and condition messages, and of topic messages.
    static let maximumData = 4096
    static let maximumTopicData = 2048
    /// Longest `android.ttl`: four weeks.
    static let maximumTTL = 2_419_200
    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"
    static let quotaFailureType = "type.googleapis.com/google.rpc.QuotaFailure"
    static let unauthenticatedMessage =
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
    static let invalidArgumentMessage = "Request contains an invalid argument."
    static let messageFields: Set<String> = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions", "token", "topic", "condition",
    ]
    static let androidFields: Set<String> = [
        "collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name", "restrictedPackageName", "data", "notification",
        "fcm_options", "fcmOptions", "direct_boot_ok", "directBootOk",
    ]
    static let priorities: Set<String> = ["NORMAL", "HIGH", "normal", "high"]
    /// `message.notification`: what every platform shows.
    static let notificationFields: Set<String> = ["title", "body", "image"]
    /// `message.android.notification` (AndroidNotification), in both spellings.
    static let androidNotificationFields: Set<String> = [
        "title", "body", "icon", "color", "sound", "tag", "click_action", "clickAction", "body_loc_key", "bodyLocKey", "body_loc_args",
        "bodyLocArgs", "title_loc_key", "titleLocKey", "title_loc_args", "titleLocArgs", "channel_id", "channelId", "ticker", "sticky",
        "event_time", "eventTime", "local_only", "localOnly", "notification_priority", "notificationPriority", "default_sound",
        "defaultSound", "default_vibrate_timings", "defaultVibrateTimings", "default_light_settings", "defaultLightSettings",
        "vibrate_timings", "vibrateTimings", "visibility", "notification_count", "notificationCount", "light_settings", "lightSettings",
        "image", "bypass_proxy_notification", "bypassProxyNotification", "proxy",
    ]
    /// AndroidNotification fields that are strings.
    static let androidNotificationStrings: Set<String> = [
        "title", "body", "icon", "color", "sound", "tag", "click_action", "clickAction", "channel_id", "channelId", "ticker", "image",
    ]

    /// Whether a data key is reserved: `from`, `gcm`, or anything starting with `google`.
    static func isReserved(_ key: String) -> Bool {
        key == "from" || key == "gcm" || key.hasPrefix("google")
    }

    /// Registration tokens are base64url-ish text with `:` (`bk3RNwTe3H0:CI2k_HHwgIpo…`).
    static func isWellFormedToken(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count <= 4096
            && token.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || [UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: ".")].contains(byte)
            }
    }

    /// A protobuf Duration in JSON: seconds with up to nine fractional digits, then `s`.
    static func durationSeconds(_ text: String) -> Double? {
        guard text.hasSuffix("s") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count) else { return nil }
        let whole = parts[0].hasPrefix("-") ? parts[0].dropFirst() : parts[0]
        guard !whole.isEmpty, whole.allSatisfy(\.isASCIIDigit) else { return nil }
        if parts.count == 2 { guard (1...9).contains(parts[1].count), parts[1].allSatisfy(\.isASCIIDigit) else { return nil } }
        return Double(number)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

/// Why a message was refused: the status and Google's envelope.
struct FCMRejection: Error {
    var status: Int
    var rpcStatus: String
    var message: String
    var errorCode: String?
    var violations: [(field: String?, description: String)] = []
    var retryAfter: Int?

    static func invalid(_ message: String, field: String? = nil, fcmError: Bool = false) -> FCMRejection {
        FCMRejection(
            status: 400, rpcStatus: "INVALID_ARGUMENT", message: message, errorCode: fcmError ? "INVALID_ARGUMENT" : nil,
            violations: [(field, message)])
    }

    /// `Invalid value at 'message.data[0].value' (TYPE_STRING), 12`, as Google's proto-JSON parser says it.
    static func invalidValue(at field: String, type: String, _ value: FCMJSONValue) -> FCMRejection {
        invalid("Invalid value at '\(field)' (\(type)), \(value.jsonText)", field: field)
    }

    static func unknownName(_ name: String, at path: String?) -> FCMRejection {
        let location = path.map { " at '\($0)'" } ?? ""
        return invalid("Invalid JSON payload received. Unknown name \"\(name)\"\(location): Cannot find field.", field: path)
    }

    /// `{"error":{"code","message","status","details":[…]}}`.
    var body: [UInt8] {
        var details: [FCMJSONValue] = []
        if let errorCode {
            details.append(.object([("@type", .string(FCMRules.fcmErrorType)), ("errorCode", .string(errorCode))]))
        }
        if errorCode == "QUOTA_EXCEEDED" {
            details.append(
                .object([
                    ("@type", .string(FCMRules.quotaFailureType)),
                    ("violations", .array([.object([("subject", .string("device")), ("description", .string(message))])])),
                ]))
        }
        if !violations.isEmpty {
            let items: [FCMJSONValue] = violations.map { violation in
                var members: [(key: String, value: FCMJSONValue)] = []
                if let field = violation.field { members.append(("field", .string(field))) }
                members.append(("description", .string(violation.description)))
                return .object(members)
            }
            details.append(.object([("@type", .string(FCMRules.badRequestType)), ("fieldViolations", .array(items))]))
        }
        var error: [(key: String, value: FCMJSONValue)] = [
            ("code", .number(String(status))), ("message", .string(message)), ("status", .string(rpcStatus)),
        ]
        if !details.isEmpty { error.append(("details", .array(details))) }
        return Array(FCMJSONValue.object([("error", .object(error))]).jsonText.utf8)
    }
}

extension FCMSimulator {
    static let jsonContentType = ("content-type", "application/json; charset=UTF-8")

    /// Routes a request and decides the answer; records what it saw.
    func answer(_ request: FCMHTTPRequest, connectionID: Int) -> FCMSimulatedAnswer {
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        if request.method == "POST", path == FCMRules.tokenPath {
            return answerTokenRequest(request)
        }
        if request.method == "POST", path.hasPrefix(FCMRules.sendPathPrefix), path.hasSuffix(FCMRules.sendPathSuffix) {
            let encoded = path.dropFirst(FCMRules.sendPathPrefix.count).dropLast(FCMRules.sendPathSuffix.count)
            let project = String(encoded).removingPercentEncoding ?? String(encoded)
            if !project.isEmpty, !project.contains("/") {
                return answerSend(request, projectID: project, connectionID: connectionID)
            }
        }
        let notFound = FCMRejection(status: 404, rpcStatus: "NOT_FOUND", message: "Requested entity was not found.", errorCode: nil)
        return .respond(status: 404, headers: [Self.jsonContentType], body: notFound.body)
    }

    // MARK: Token endpoint

    private func answerTokenRequest(_ request: FCMHTTPRequest) -> FCMSimulatedAnswer {
        let now = configuration.clock.now
        let form = Self.formFields(request.body)
        var record = TokenRequest(
            clientEmail: nil, scope: nil, status: 400, error: nil, errorDescription: nil, expiresIn: nil, receivedAt: now)
        func reject(_ status: Int, _ error: String, _ description: String) -> FCMSimulatedAnswer {
            record.status = status
            record.error = error
            record.errorDescription = description
            self.record(record)
            let body = FCMJSONValue.object([("error", .string(error)), ("error_description", .string(description))]).jsonText
            return .respond(status: status, headers: [Self.jsonContentType], body: Array(body.utf8))
        }

        guard let grantType = form["grant_type"], grantType == FCMRules.jwtBearerGrant else {
            return reject(400, "unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")")
        }
        guard let assertion = form["assertion"], !assertion.isEmpty else {
            return reject(400, "invalid_request", "Missing required parameter: assertion")
        }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = base64URLDecode(parts[0]), let claimsBytes = base64URLDecode(parts[1]),
            let signature = base64URLDecode(parts[2]),
            let header = try? JSONSerialization.jsonObject(with: headerBytes) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: claimsBytes) as? [String: Any]
        else { return reject(400, "invalid_grant", "Invalid JWT: Failed to parse the assertion.") }
        record.clientEmail = claims["iss"] as? String
        record.scope = claims["scope"] as? String

        switch takeOAuthFailure(forClientEmail: record.clientEmail) {
        case .reject(let status, let error, let description)?:
            return reject((400...599).contains(status) ? status : 400, error, description)
        case .stall?:
            record.status = 0
            self.record(record)
            return .stall
        case nil:
            break
        }

        guard let email = record.clientEmail, let account = state.withLock({ $0.serviceAccounts[email] }) else {
            return reject(400, "invalid_grant", "Invalid grant: account not found")
        }
        guard header["alg"] as? String == "RS256" else { return reject(400, "invalid_grant", "Invalid JWT Signature.") }
        if let expected = account.privateKeyID, let kid = header["kid"] as? String, kid != expected {
            return reject(400, "invalid_grant", "Invalid JWT Signature.")
        }
        let signingInput = Data(assertion.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard
            account.publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: signingInput, padding: .insecurePKCS1v1_5)
        else { return reject(400, "invalid_grant", "Invalid JWT Signature.") }
        guard claims["aud"] as? String == tokenURL else {
            return reject(400, "invalid_grant", "Invalid JWT: Failed audience check. The expected value is \(tokenURL).")
        }
        let nowSeconds = Int64(now.timeIntervalSince1970.rounded(.down))
        guard let iat = Self.integer(claims["iat"]), let exp = Self.integer(claims["exp"]), exp > iat,
            exp - iat <= FCMRules.maximumAssertionLifetime, exp > nowSeconds, iat <= nowSeconds + FCMRules.assertionFutureSkew
        else {
            return reject(
                400, "invalid_grant",
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
            )
        }
        let scopes = Set((record.scope ?? "").split(separator: " ").map(String.init))
        guard !scopes.isDisjoint(with: FCMRules.sendScopes) else {
            return reject(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }

        let token = "ya29.sim." + Self.randomToken(bytes: 36)
        let lifetime = max(1, configuration.accessTokenLifetime)
        state.withLock {
            $0.accessTokens[token] = FCMIssuedToken(
                clientEmail: email, projectID: account.projectID, expiresAt: now.addingTimeInterval(TimeInterval(lifetime)))
        }
        record.status = 200
        record.expiresIn = lifetime
        self.record(record)
        let body = FCMJSONValue.object([
            ("access_token", .string(token)), ("expires_in", .number(String(lifetime))), ("token_type", .string("Bearer")),
        ]).jsonText
        return .respond(
            status: 200, headers: [Self.jsonContentType, ("cache-control", "no-cache, no-store, max-age=0, must-revalidate")], body: Array(body.utf8))
    }

    // MARK: Send endpoint

    private func answerSend(_ request: FCMHTTPRequest, projectID: String, connectionID: Int) -> FCMSimulatedAnswer {
        let now = configuration.clock.now
        let parsed = request.truncated ? nil : FCMJSONValue.parse(request.body)
        let message = parsed?["message"]
        var headers: [String: String] = [:]
        for (name, value) in request.headers { headers[name] = headers[name].map { "\($0),\(value)" } ?? value }
        var data: [String: String] = [:]
        if case .object(let members)? = message?["data"] {
            for (key, value) in members { if let text = value.stringValue { data[key] = text } }
        }
        var received = ReceivedMessage(
            projectID: projectID, registrationToken: message?["token"]?.stringValue ?? "", data: data,
            androidPriority: message?["android"]?["priority"]?.stringValue, androidTTL: message?["android"]?["ttl"]?.stringValue,
            validateOnly: Self.isTrue(parsed?["validate_only"] ?? parsed?["validateOnly"]), body: Data(request.body),
            headers: headers, status: 0, errorCode: nil, errorMessage: nil, messageName: nil, receivedAt: now, connectionID: connectionID)
        if case .object(let members)? = message?["notification"] {
            for (key, value) in members { if let text = value.stringValue { received.notification[key] = text } }
        }

        func reject(_ rejection: FCMRejection) -> FCMSimulatedAnswer {
            received.status = rejection.status
            received.errorCode = rejection.errorCode ?? rejection.rpcStatus
            received.errorMessage = rejection.message
            record(received)
            var headers = [Self.jsonContentType]
            if let retryAfter = rejection.retryAfter { headers.append(("retry-after", String(retryAfter))) }
            if rejection.status == 401, rejection.errorCode == nil {
                headers.append(("www-authenticate", "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\""))
            }
            return .respond(status: rejection.status, headers: headers, body: rejection.body)
        }

        // Authentication, then the project the token's account belongs to.
        let authorization = request.header("authorization") ?? ""
        guard authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            return reject(FCMRejection(status: 401, rpcStatus: "UNAUTHENTICATED", message: FCMRules.unauthenticatedMessage, errorCode: nil))
        }
        let token = authorization.dropFirst(7).trimmingSpacesAndTabs
        guard let issued = state.withLock({ $0.accessTokens[token] }), now < issued.expiresAt else {
            return reject(FCMRejection(status: 401, rpcStatus: "UNAUTHENTICATED", message: FCMRules.unauthenticatedMessage, errorCode: nil))
        }
        guard issued.projectID == projectID else {
            return reject(
                FCMRejection(
                    status: 403, rpcStatus: "PERMISSION_DENIED",
                    message:
                        "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(projectID)' (or it may not exist).",
                    errorCode: nil))
        }

        // A scripted answer for the registration token.
        var delay: Duration?
        switch takeBehaviour(forRegistrationToken: received.registrationToken) {
        case .error(let code, let retryAfter)?:
            var rejection = FCMRejection(status: code.httpStatus, rpcStatus: code.rpcStatus, message: code.message, errorCode: code.rawValue)
            rejection.retryAfter = retryAfter
            return reject(rejection)
        case .stall?:
            record(received)
            return .stall
        case .delay(let duration)?:
            delay = duration
        case nil:
            break
        }

        // The message, as FCM validates it.
        do {
            guard let parsed else {
                throw request.truncated
                    ? FCMRejection.invalid(FCMRules.invalidArgumentMessage)
                    : FCMRejection.invalid("Invalid JSON payload received. Unexpected token.")
            }
            try validate(parsed)
        } catch let rejection as FCMRejection {
            let answer = reject(rejection)
            return delay.map { .delayed($0, answer) } ?? answer
        } catch {
            return reject(FCMRejection.invalid(FCMRules.invalidArgumentMessage))
        }

        let name: String
        if received.validateOnly {
            name = "projects/\(projectID)/messages/fake_message_id"
        } else {
            let counter = state.withLock { state -> UInt64 in
                state.messageCounter &+= 1
                return state.messageCounter
            }
            let micros = UInt64(max(0, now.timeIntervalSince1970) * 1_000_000) &+ counter
            name = "projects/\(projectID)/messages/0:\(micros)%\(String(format: "%016llx", counter &* 0x9E37_79B9_7F4A_7C15))"
        }
        received.status = 200
        received.messageName = name
        record(received)
        let answer = FCMSimulatedAnswer.respond(
            status: 200, headers: [Self.jsonContentType], body: Array(FCMJSONValue.object([("name", .string(name))]).jsonText.utf8))
        return delay.map { .delayed($0, answer) } ?? answer
    }

    /// Checks a send body like FCM: known fields, exactly one target, string data, reserved keys,
    /// the size limit, `android.priority` and `android.ttl`, and the token's shape.
    /// Checks an object of known fields whose `strings` members, when present, are strings.
    private static func validateStrings(
        _ value: FCMJSONValue, at path: String, type: String, allowed: Set<String>, strings: Set<String>
    ) throws(FCMRejection) {
        guard case .object(let fields) = value else { throw .invalidValue(at: path, type: type, value) }
        for (key, member) in fields {
            guard allowed.contains(key) else { throw .unknownName(key, at: path) }
            if strings.contains(key), !isNull(member), member.stringValue == nil {
                throw .invalidValue(at: "\(path).\(key)", type: "TYPE_STRING", member)
            }
        }
    }

    func validate(_ body: FCMJSONValue) throws(FCMRejection) {
        guard case .object(let top) = body else {
            throw .invalid("Invalid JSON payload received. Expected an object.")
        }
        for (key, _) in top where !["message", "validate_only", "validateOnly"].contains(key) {
            throw .unknownName(key, at: nil)
        }
        guard let message = body["message"] else {
            throw FCMRejection.invalid("Recipient of the message is not set.", field: "message", fcmError: true)
        }
        guard case .object(let fields) = message else {
            throw .invalidValue(at: "message", type: "type.googleapis.com/google.firebase.fcm.v1.Message", message)
        }
        for (key, _) in fields where !FCMRules.messageFields.contains(key) {
            throw .unknownName(key, at: "message")
        }

        let targets = fields.filter { ["token", "topic", "condition"].contains($0.key) && !Self.isNull($0.value) }
        guard let target = targets.first else {
            throw FCMRejection.invalid("Recipient of the message is not set.", field: "message", fcmError: true)
        }
        if targets.count > 1 {
            throw .invalid("Invalid JSON payload received. oneof field 'target' is already set. Cannot set '\(targets[1].key)'")
        }
        guard let targetValue = target.value.stringValue else {
            throw .invalidValue(at: "message.\(target.key)", type: "TYPE_STRING", target.value)
        }

        var dataSize = 0
        for path in ["data", "android.data"] {
            let value = path == "data" ? fields.first(where: { $0.key == "data" })?.value : message["android"]?["data"]
            guard let value, !Self.isNull(value) else { continue }
            guard case .object(let entries) = value else {
                throw .invalidValue(at: "message.\(path)", type: "type.googleapis.com/google.protobuf.Struct", value)
            }
            for (index, entry) in entries.enumerated() {
                guard let text = entry.value.stringValue else {
                    throw .invalidValue(at: "message.\(path)[\(index)].value", type: "TYPE_STRING", entry.value)
                }
                if FCMRules.isReserved(entry.key) {
                    throw FCMRejection.invalid(
                        FCMRules.invalidArgumentMessage + " Data key '\(entry.key)' is reserved.", field: "message.\(path)", fcmError: true)
                }
                if path == "data" { dataSize += entry.key.utf8.count + text.utf8.count }
            }
        }

        if let notification = message["notification"], !Self.isNull(notification) {
            try Self.validateStrings(
                notification, at: "message.notification", type: "type.googleapis.com/google.firebase.fcm.v1.Notification",
                allowed: FCMRules.notificationFields, strings: FCMRules.notificationFields)
        }
        if let android = message["android"], !Self.isNull(android) {
            guard case .object(let androidFields) = android else {
                throw .invalidValue(at: "message.android", type: "type.googleapis.com/google.firebase.fcm.v1.AndroidConfig", android)
            }
            for (key, _) in androidFields where !FCMRules.androidFields.contains(key) {
                throw .unknownName(key, at: "message.android")
            }
            if let priority = android["priority"], !Self.isNull(priority) {
                guard let text = priority.stringValue, FCMRules.priorities.contains(text) else {
                    throw .invalidValue(
                        at: "message.android.priority", type: "type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority", priority)
                }
            }
            if let notification = android["notification"], !Self.isNull(notification) {
                try Self.validateStrings(
                    notification, at: "message.android.notification", type: "type.googleapis.com/google.firebase.fcm.v1.AndroidNotification",
                    allowed: FCMRules.androidNotificationFields, strings: FCMRules.androidNotificationStrings)
            }
            for key in ["collapse_key", "collapseKey"] {
                if let value = android[key], !Self.isNull(value), value.stringValue == nil {
                    throw .invalidValue(at: "message.android.\(key)", type: "TYPE_STRING", value)
                }
            }
            if let ttl = android["ttl"], !Self.isNull(ttl) {
                guard let text = ttl.stringValue, let seconds = FCMRules.durationSeconds(text) else {
                    throw .invalidValue(at: "message.android.ttl", type: "type.googleapis.com/google.protobuf.Duration", ttl)
                }
                guard seconds >= 0, seconds <= Double(FCMRules.maximumTTL) else {
                    throw FCMRejection.invalid(
                        "TTL must be between 0s and \(FCMRules.maximumTTL)s.", field: "message.android.ttl", fcmError: true)
                }
            }
        }

        let limit = target.key == "topic" ? FCMRules.maximumTopicData : FCMRules.maximumData
        guard dataSize <= limit else {
            throw FCMRejection(status: 400, rpcStatus: "INVALID_ARGUMENT", message: FCMRules.invalidArgumentMessage, errorCode: nil)
        }
        if target.key == "token", !FCMRules.isWellFormedToken(targetValue) {
            throw FCMRejection(
                status: 400, rpcStatus: "INVALID_ARGUMENT", message: FCMSimulator.ErrorCode.invalidArgument.message,
                errorCode: "INVALID_ARGUMENT")
        }
    }

    // MARK: Helpers

    private static func isNull(_ value: FCMJSONValue) -> Bool {
        if case .null = value { return true }
        return false
    }

    private static func isTrue(_ value: FCMJSONValue?) -> Bool {
        if case .bool(true)? = value { return true }
        return false
    }

    private static func integer(_ value: Any?) -> Int64? {
        if let number = value as? Int { return Int64(number) }
        if let number = value as? Double, number.rounded() == number { return Int64(number) }
        return nil
    }

    /// `application/x-www-form-urlencoded` fields (`+` is a space); the first of a repeated name wins.
    static func formFields(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                let spaced = text.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            let name = decode(parts[0])
            if fields[name] == nil { fields[name] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return fields
    }

    /// Random bytes as base64url.
    static func randomToken(bytes: Int) -> String {
        Data((0..<bytes).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
