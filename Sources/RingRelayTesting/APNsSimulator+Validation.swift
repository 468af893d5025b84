import Crypto
import Foundation

/// One complete request as the stream handler collected it.
struct SimulatedRequest {
    var method: String
    var path: String
    /// Every header in arrival order, pseudo-headers included.
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// The full body length, which may exceed `body.count` when the body was too large to keep.
    var bodyLength: Int

    /// The device token from `/3/device/<token>`, or "" when the path has none.
    var deviceToken: String {
        path.hasPrefix(APNsRules.devicePathPrefix) ? String(path.dropFirst(APNsRules.devicePathPrefix.count)) : ""
    }

    /// The first value of a header.
    func header(_ name: String) -> String? {
        headers.first(where: { $0.name == name })?.value
    }
}

/// The answer the simulator decided on.
struct SimulatedAnswer {
    var status: Int
    var reason: String?
    var timestamp: Date?
    var apnsID: String
    /// The request was authenticated with a provider token and succeeded: the connection may
    /// now open more streams.
    var tokenAuthenticationSucceeded = false
}

/// What one connection remembers between its requests. Confined to the connection's event loop.
final class APNsConnectionState {
    let id: Int
    /// Topics of the registered client certificate the connection presented, if any.
    let certificateTopics: Set<String>?
    /// The connection presented some client certificate (registered or not).
    let presentedCertificate: Bool
    /// The provider token in force on this connection and its `iat`.
    var currentToken: (token: String, issuedAt: Int64)?
    /// The team the connection's first token bound it to.
    var teamID: String?
    /// The last token whose signature verified on this connection.
    var verifiedToken: (token: String, verified: APNsSimulator.VerifiedToken)?
    /// SETTINGS_MAX_CONCURRENT_STREAMS was raised after the first successful token push.
    var streamLimitRaised: Bool

    init(id: Int, certificateTopics: Set<String>?, presentedCertificate: Bool) {
        self.id = id
        self.certificateTopics = certificateTopics
        self.presentedCertificate = presentedCertificate
        self.streamLimitRaised = certificateTopics != nil
    }
}

/// The provider API's rules, from Apple's "Sending notification requests to APNs" and
/// "Handling notification responses from APNs".
enum APNsRules {
    static let devicePathPrefix = "/3/device/"
    static let maximumPayload = 4096
    static let maximumVoIPPayload = 5120
    static let maximumCollapseID = 64
    /// A provider token older than this is expired.
    static let tokenLifetime: Int64 = 3600
    /// A provider token may be this far in the future (clock skew).
    static let tokenFutureSkew: Int64 = 60
    /// A connection may switch tokens at most this often.
    static let tokenUpdateInterval: Int64 = 20 * 60

    /// How `apns-topic` relates to the bundle id for a push type.
    enum TopicForm {
        /// The bare bundle id.
        case bundle
        /// The bundle id plus this suffix.
        case suffixed(String)
        /// Anything (mdm: the UID from the MDM certificate).
        case opaque
    }

    /// The push types Apple documents and their topic forms.
    static let pushTypes: [String: TopicForm] = [
        "alert": .bundle,
        "background": .bundle,
        "voip": .suffixed(".voip"),
        "location": .suffixed(".location-query"),
        "complication": .suffixed(".complication"),
        "fileprovider": .suffixed(".pushkit.fileprovider"),
        "liveactivity": .suffixed(".push-type.liveactivity"),
        "pushtotalk": .suffixed(".voip-ptt"),
        "widgets": .suffixed(".push-type.widgets"),
        "controls": .suffixed(".push-type.controls"),
        "mdm": .opaque,
    ]

    /// Every topic suffix, longest first so `.voip-ptt` is not mistaken for `.voip`.
    static let suffixes: [(suffix: String, pushType: String)] = pushTypes.compactMap { entry in
        if case .suffixed(let suffix) = entry.value { return (suffix, entry.key) }
        return nil
    }.sorted { $0.suffix.count > $1.suffix.count }

    /// The payload limit for a push type.
    static func maximumPayload(forPushType pushType: String) -> Int {
        pushType == "voip" ? maximumVoIPPayload : maximumPayload
    }
}

extension APNsSimulator {
    /// Validates a request like APNs and decides the answer; updates the connection's token state.
    func validate(_ request: SimulatedRequest, connection: APNsConnectionState, now: Date) -> SimulatedAnswer {
        let requestedID = request.header("apns-id")
        let echoedID = requestedID.flatMap { Self.isCanonicalUUID($0) ? $0 : nil } ?? UUID().uuidString.lowercased()
        func reject(_ status: Int, _ reason: String) -> SimulatedAnswer {
            SimulatedAnswer(status: status, reason: reason, apnsID: echoedID)
        }

        // :method and :path
        guard request.method == "POST" else { return reject(405, "MethodNotAllowed") }
        guard request.path.hasPrefix(APNsRules.devicePathPrefix) else { return reject(404, "BadPath") }
        let token = request.deviceToken
        guard !token.contains("/") else { return reject(404, "BadPath") }
        guard !token.isEmpty else { return reject(400, "MissingDeviceToken") }
        guard token.utf8.count % 2 == 0, token.utf8.allSatisfy(Self.isHexDigit) else {
            return reject(400, "BadDeviceToken")
        }

        // Repeated headers (pseudo-headers are policed by the HTTP/2 layer).
        var seen = Set<String>()
        for (name, _) in request.headers where !name.hasPrefix(":") {
            guard seen.insert(name).inserted else { return reject(400, "DuplicateHeaders") }
        }

        // Authentication: a registered client certificate, else a provider token.
        let allowedTopics: Set<String>?
        var tokenAuthenticated = false
        if let certificateTopics = connection.certificateTopics {
            allowedTopics = certificateTopics
        } else {
            switch authenticateToken(request.header("authorization"), connection: connection, now: now) {
            case .rejected(let status, let reason):
                return reject(status, reason)
            case .accepted(let topics):
                allowedTopics = topics
                tokenAuthenticated = true
            }
        }

        if let requestedID, !Self.isCanonicalUUID(requestedID) { return reject(400, "BadMessageId") }

        // apns-push-type and apns-topic.
        let explicitPushType = request.header("apns-push-type")
        if let explicitPushType, APNsRules.pushTypes[explicitPushType] == nil { return reject(400, "InvalidPushType") }
        var topic = request.header("apns-topic") ?? ""
        if topic.isEmpty {
            // With certificate auth APNs defaults to the certificate's topic when it has exactly one.
            guard let only = connection.certificateTopics, only.count == 1, let bundle = only.first else {
                return reject(400, "MissingTopic")
            }
            switch explicitPushType.flatMap({ APNsRules.pushTypes[$0] }) {
            case .suffixed(let suffix): topic = bundle + suffix
            default: topic = bundle
            }
        }
        // Without apns-push-type, infer it from the topic like older APNs did.
        let pushType = explicitPushType ?? APNsRules.suffixes.first(where: { topic.hasSuffix($0.suffix) })?.pushType ?? "alert"
        let bundle: String
        switch APNsRules.pushTypes[pushType] ?? .bundle {
        case .bundle:
            if APNsRules.suffixes.contains(where: { topic.hasSuffix($0.suffix) }) { return reject(400, "BadTopic") }
            bundle = topic
        case .suffixed(let suffix):
            guard topic.hasSuffix(suffix), topic.count > suffix.count else {
                return reject(400, pushType == "voip" ? "InvalidPushType" : "BadTopic")
            }
            bundle = String(topic.dropLast(suffix.count))
        case .opaque:
            bundle = topic
        }
        if let allowedTopics, !allowedTopics.contains(bundle) { return reject(400, "TopicDisallowed") }

        // apns-priority, apns-expiration, apns-collapse-id.
        if let priority = request.header("apns-priority") {
            guard ["1", "5", "10"].contains(priority) else { return reject(400, "BadPriority") }
            if pushType == "background", priority == "10" { return reject(400, "BadPriority") }
        }
        if let expiration = request.header("apns-expiration") {
            guard !expiration.isEmpty, expiration.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), Int64(expiration) != nil
            else { return reject(400, "BadExpirationDate") }
        }
        if let collapseID = request.header("apns-collapse-id"), collapseID.utf8.count > APNsRules.maximumCollapseID {
            return reject(400, "BadCollapseId")
        }

        // The payload.
        guard request.bodyLength > 0 else { return reject(400, "PayloadEmpty") }
        guard request.bodyLength <= APNsRules.maximumPayload(forPushType: pushType) else {
            return reject(413, "PayloadTooLarge")
        }

        return SimulatedAnswer(status: 200, reason: nil, apnsID: echoedID, tokenAuthenticationSucceeded: tokenAuthenticated)
    }

    /// The result of checking a provider token.
    enum TokenCheck {
        /// The token is good; these topics (`nil`: any) may be pushed to.
        case accepted(topics: Set<String>?)
        case rejected(status: Int, reason: String)
    }

    /// Checks `authorization: bearer <jwt>` (Apple's "Establishing a token-based connection to APNs") and the
    /// per-connection token rules.
    func authenticateToken(_ authorization: String?, connection: APNsConnectionState, now: Date) -> TokenCheck {
        let value = authorization?.trimmingSpacesAndTabs ?? ""
        guard !value.isEmpty else {
            // A client certificate we don't know and no token: the certificate is what's wrong.
            return .rejected(status: 403, reason: connection.presentedCertificate ? "BadCertificate" : "MissingProviderToken")
        }
        guard value.count > 7, value.prefix(7).lowercased() == "bearer " else {
            return .rejected(status: 403, reason: "InvalidProviderToken")
        }
        let jwt = value.dropFirst(7).trimmingSpacesAndTabs
        guard !jwt.isEmpty else { return .rejected(status: 403, reason: "MissingProviderToken") }

        let seconds = Int64(now.timeIntervalSince1970.rounded(.down))
        let verified: VerifiedToken
        if let cached = connection.verifiedToken, cached.token == jwt {
            // The connection's token was verified when it first came; like APNs, only its age is
            // checked again (the signature is the expensive part).
            if seconds - cached.verified.issuedAt > APNsRules.tokenLifetime { return .rejected(status: 403, reason: "ExpiredProviderToken") }
            verified = cached.verified
        } else {
            switch verifyProviderToken(jwt, credentials: credentials, now: seconds) {
            case .failure(let rejection): return .rejected(status: 403, reason: rejection.reason)
            case .success(let token): verified = token
            }
        }

        // One connection carries one team's tokens (key scopes).
        if let team = connection.teamID, team != verified.teamID {
            return .rejected(status: 403, reason: "UnrelatedKeyIdInToken")
        }
        // A new token on the same connection within 20 minutes of the last one.
        if let current = connection.currentToken, current.token != jwt {
            guard verified.issuedAt - current.issuedAt >= APNsRules.tokenUpdateInterval else {
                return .rejected(status: 429, reason: "TooManyProviderTokenUpdates")
            }
        }
        connection.teamID = verified.teamID
        connection.currentToken = (jwt, verified.issuedAt)
        connection.verifiedToken = (jwt, verified)
        return .accepted(topics: verified.topics)
    }

    /// A provider token that passed the signature and age checks.
    struct VerifiedToken {
        var teamID: String
        var issuedAt: Int64
        var topics: Set<String>?
    }

    /// Why a provider token was refused (always a 403 reason).
    struct TokenRejection: Error {
        var reason: String
        static let invalid = TokenRejection(reason: "InvalidProviderToken")
        static let expired = TokenRejection(reason: "ExpiredProviderToken")
    }

    /// The JOSE header APNs reads.
    private struct TokenHeader: Decodable {
        var alg: String
        var kid: String
    }

    /// The claims APNs reads.
    private struct TokenClaims: Decodable {
        var iss: String
        var iat: Int64
    }

    /// Checks a JWT's shape, ES256 signature (raw 64-byte R||S over `header.payload`) and `iat`.
    func verifyProviderToken(_ jwt: String, credentials: Credentials, now: Int64) -> Result<VerifiedToken, TokenRejection> {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = base64URLDecode(parts[0]),
            let claimsBytes = base64URLDecode(parts[1]),
            let signatureBytes = base64URLDecode(parts[2]),
            let header = try? JSONDecoder().decode(TokenHeader.self, from: headerBytes),
            let claims = try? JSONDecoder().decode(TokenClaims.self, from: claimsBytes)
        else { return .failure(.invalid) }
        guard header.alg == "ES256", !header.kid.isEmpty, !claims.iss.isEmpty else { return .failure(.invalid) }
        // RFC 7518 §3.4: R and S, 32 octets each; a DER signature is 70–72 bytes and is refused.
        guard signatureBytes.count == 64 else { return .failure(.invalid) }

        let topics: Set<String>?
        if let key = credentials.signingKeys[SigningKeyID(teamID: claims.iss, keyID: header.kid)] {
            let signingInput = Data(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
            guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
                key.publicKey.isValidSignature(signature, for: signingInput)
            else { return .failure(.invalid) }
            topics = key.topics
        } else if let any = credentials.anyToken {
            topics = any.topics
        } else {
            return .failure(.invalid)
        }

        if now - claims.iat > APNsRules.tokenLifetime { return .failure(.expired) }
        if claims.iat - now > APNsRules.tokenFutureSkew { return .failure(.invalid) }
        return .success(VerifiedToken(teamID: claims.iss, issuedAt: claims.iat, topics: topics))
    }

    /// A canonical lowercase UUID: 8-4-4-4-12 lowercase hex digits.
    static func isCanonicalUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) else { return false }
            }
        }
        return true
    }

    /// 0-9, a-f, A-F.
    static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46)
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs. Foundation's `trimmingCharacters`
    /// bridges through NSString and cost more than the rest of a request's validation.
    var trimmingSpacesAndTabs: String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isBlank($0) }), let last = lastIndex(where: { !isBlank($0) }) else { return "" }
        return String(self[first...last])
    }
}
