import Foundation
import Logging
import NIOCore
import NIOSSL
import RingRelayCore
import Synchronization
import _CryptoExtras

/// A local stand-in for Firebase Cloud Messaging HTTP v1 and Google's OAuth 2.0 token endpoint,
/// over TLS on loopback (HTTP/2 or HTTP/1.1, as the client prefers; Google serves both).
///
/// - `POST /token` takes the JWT-bearer grant (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=…`),
///   verifies the RS256 assertion against a registered service account's public key (`iss`, `kid`,
///   `aud` = ``tokenURL``, `scope`, `iat`/`exp` at most an hour apart and current) and issues an
///   opaque access token with `expires_in`, or answers `{"error":"invalid_grant",…}` like Google.
/// - `POST /v1/projects/{project_id}/messages:send` checks the bearer token (401 `UNAUTHENTICATED`),
///   the project (403 `PERMISSION_DENIED`) and the message as FCM does (exactly one target, string
///   data values, reserved keys, 4096 bytes, `android.priority`, `android.ttl`), answering in
///   Google's error envelope with the `FcmError` detail.
///
/// Tests script per-token answers with ``setBehaviour(_:forRegistrationToken:times:)``, token endpoint
/// failures with ``setOAuthFailure(_:forClientEmail:times:)``, and inspect ``received`` and ``tokenRequests``.
///
/// ```swift
/// let simulator = try FCMSimulator()
/// try await simulator.start()
/// let serviceAccount = try simulator.makeServiceAccount(projectID: "my-project")  // token_uri points here
/// // point the client at simulator.url, trusting simulator.certificatePEM
/// try await simulator.shutdown()
/// ```
public final class FCMSimulator: Sendable {
    /// How the simulator listens and answers.
    public struct Configuration: Sendable {
        /// The address to bind.
        public var host = "127.0.0.1"
        /// The port to bind; 0 picks a free one (read it back from ``FCMSimulator/port``).
        public var port = 0
        /// The source of "now" for assertion times, access token expiry and ``ReceivedMessage/receivedAt``.
        public var clock: any WallClock = SystemWallClock()
        /// `expires_in` of issued access tokens, in seconds (Google issues 3599).
        public var accessTokenLifetime = 3599
        /// Keeps only the newest this many entries in ``FCMSimulator/received`` and ``FCMSimulator/tokenRequests``; `nil` keeps all.
        public var maximumRecordedMessages: Int? = nil
        /// Called (on a network thread) for every recorded message, e.g. to print it.
        public var onMessage: (@Sendable (ReceivedMessage) -> Void)? = nil
        /// Called (on a network thread) for every token request.
        public var onTokenRequest: (@Sendable (TokenRequest) -> Void)? = nil
        /// Where the simulator logs connection-level trouble; silent by default.
        public var logger = Logger(label: "ringrelay.fcm-simulator", factory: { _ in SwiftLogNoOpLogHandler() })

        /// Creates the default configuration: 127.0.0.1, a free port, hour-long access tokens.
        public init() {}
    }

    /// An FCM error code the simulator can answer with, with the HTTP status, RPC status and
    /// message Google sends for it.
    public enum ErrorCode: String, Sendable, Hashable, CaseIterable {
        case unregistered = "UNREGISTERED"
        case invalidArgument = "INVALID_ARGUMENT"
        case quotaExceeded = "QUOTA_EXCEEDED"
        case unavailable = "UNAVAILABLE"
        case `internal` = "INTERNAL"
        case senderIDMismatch = "SENDER_ID_MISMATCH"
        case thirdPartyAuthError = "THIRD_PARTY_AUTH_ERROR"

        /// The HTTP status FCM answers with.
        public var httpStatus: Int {
            switch self {
            case .unregistered: 404
            case .invalidArgument: 400
            case .quotaExceeded: 429
            case .unavailable: 503
            case .internal: 500
            case .senderIDMismatch: 403
            case .thirdPartyAuthError: 401
            }
        }

        /// The top-level `error.status` (the generic RPC code).
        public var rpcStatus: String {
            switch self {
            case .unregistered: "NOT_FOUND"
            case .invalidArgument: "INVALID_ARGUMENT"
            case .quotaExceeded: "RESOURCE_EXHAUSTED"
            case .unavailable: "UNAVAILABLE"
            case .internal: "INTERNAL"
            case .senderIDMismatch: "PERMISSION_DENIED"
            case .thirdPartyAuthError: "UNAUTHENTICATED"
            }
        }

        /// `error.message`.
        public var message: String {
            switch self {
            case .unregistered: "Requested entity was not found."
            case .invalidArgument: "The registration token is not a valid FCM registration token"
            case .quotaExceeded: "Quota exceeded for quota metric 'Messages sent' per device."
            case .unavailable: "The service is currently unavailable."
            case .internal: "Internal error encountered."
            case .senderIDMismatch: "SenderId mismatch"
            case .thirdPartyAuthError: "Auth error from APNS or Web Push Service"
            }
        }
    }

    /// A scripted answer for one registration token, applied after the access token and project
    /// are checked and before the message is validated.
    public enum Behaviour: Sendable, Hashable {
        /// Answer with this FCM error; `retryAfter` adds a `Retry-After` header (seconds).
        case error(ErrorCode, retryAfter: Int? = nil)
        /// Read the request and never answer, so the client has to time out.
        case stall
        /// Validate and answer normally, after this delay.
        case delay(Duration)
    }

    /// A scripted answer of the token endpoint.
    public enum OAuthFailure: Sendable, Hashable {
        /// Answer `{"error":…,"error_description":…}` with this status.
        case reject(status: Int = 400, error: String = "invalid_grant", description: String = "Invalid JWT Signature.")
        /// Never answer.
        case stall

        /// Google's answer to an assertion it cannot verify: 400 `invalid_grant`.
        public static var invalidGrant: OAuthFailure { .reject() }
    }

    /// One send request as the simulator saw it, with the answer it sent.
    public struct ReceivedMessage: Sendable, Hashable {
        /// The project id from the path.
        public var projectID: String
        /// `message.token`, or "" when the message has none.
        public var registrationToken: String
        /// `message.data`, string values only.
        public var data: [String: String]
        /// `message.android.priority`, if sent.
        public var androidPriority: String?
        /// `message.android.ttl`, if sent.
        public var androidTTL: String?
        /// `message.notification` (`title`, `body`, `image`), string values only; empty for a
        /// data-only message.
        public var notification: [String: String] = [:]
        /// `validate_only` was set.
        public var validateOnly: Bool
        /// The request body exactly as received (at most the first 256 KiB).
        public var body: Data
        /// Request headers, names lowercased; a repeated header's values joined with `,`.
        public var headers: [String: String]
        /// The HTTP status sent, or 0 when no answer was sent (stall).
        public var status: Int
        /// The FCM error code sent, else the RPC status of the error; `nil` for success.
        public var errorCode: String?
        /// `error.message` sent.
        public var errorMessage: String?
        /// The message name sent on success, `projects/{project_id}/messages/{id}`.
        public var messageName: String?
        /// When the request was complete.
        public var receivedAt: Date
        /// Which TCP connection carried it, numbered from 1 in accept order.
        public var connectionID: Int
    }

    /// One token request as the simulator saw it. The assertion and the issued token are not kept.
    public struct TokenRequest: Sendable, Hashable {
        /// The assertion's `iss`, when it could be read.
        public var clientEmail: String?
        /// The assertion's `scope`, when it could be read.
        public var scope: String?
        /// The HTTP status sent, or 0 when no answer was sent.
        public var status: Int
        /// The OAuth `error` sent; `nil` when a token was issued.
        public var error: String?
        /// `error_description` sent.
        public var errorDescription: String?
        /// `expires_in` of the issued token.
        public var expiresIn: Int?
        /// When the request was complete.
        public var receivedAt: Date
    }

    /// The trust anchor for clients: the simulator's self-signed server certificate, PEM encoded.
    public var certificatePEM: String { listener.certificate.certificatePEM }

    let configuration: Configuration
    let listener: SimulatorListener
    let state = Mutex(FCMSimulatorState())

    /// Creates a simulator with a freshly generated self-signed certificate valid for 127.0.0.1,
    /// ::1 and localhost.
    ///
    /// - Throws: if the certificate cannot be generated.
    public init(configuration: Configuration = .init()) throws {
        self.configuration = configuration
        self.listener = try SimulatorListener(name: "FCM", host: configuration.host, port: configuration.port, logger: configuration.logger)
    }

    /// Binds the listening socket; afterwards ``port`` is the bound port.
    ///
    /// - Throws: `RingRelayError` (`simulator_already_started`) on a second call, or the bind error.
    public func start() async throws {
        try await listener.start(
            tls: try listener.serverTLS(protocols: ["h2", "http/1.1"]), acceptingAnyClientCertificate: false,
            h2: { [self] in configureHTTP2(on: $0, connectionID: $1) }, other: { [self] in configureHTTP1(on: $0, connectionID: $1) })
    }

    /// The bound port (0 before ``start()``).
    public var port: Int { listener.port }

    /// The base URL, e.g. `https://127.0.0.1:8443`: give it to RingRelay as `--fcm-endpoint`.
    public var url: String { listener.url }

    /// The token endpoint, ``url`` + `/token`: the `token_uri` of service accounts made here, and
    /// the `aud` their assertions must carry.
    public var tokenURL: String { url + "/token" }

    /// Writes ``certificatePEM`` to a file, e.g. for `ringrelay serve --push-ca-file`.
    ///
    /// - Throws: the file system's error.
    public func writeCertificate(toFile path: String) throws {
        try listener.writeCertificate(toFile: path)
    }

    // MARK: Service accounts

    /// Allows assertions signed by this key for this service account.
    ///
    /// - Parameters:
    ///   - clientEmail: the `iss` the assertions carry.
    ///   - projectID: the project its access tokens may send to.
    ///   - publicKey: verifies the assertions' RS256 signatures.
    ///   - privateKeyID: the `kid` the assertions must carry when they carry one; `nil` accepts any.
    public func registerServiceAccount(clientEmail: String, projectID: String, publicKey: _RSA.Signing.PublicKey, privateKeyID: String?) {
        state.withLock {
            $0.serviceAccounts[clientEmail] = FCMRegisteredAccount(projectID: projectID, publicKey: publicKey, privateKeyID: privateKeyID)
        }
    }

    /// Allows the service account in a service account JSON object (as Google issues it).
    ///
    /// - Throws: `RingRelayError` (`invalid_service_account`) when `client_email`, `project_id` or
    ///   an RSA `private_key` is missing.
    public func registerServiceAccount(json: [String: String]) throws {
        guard let email = json["client_email"], !email.isEmpty, let project = json["project_id"], !project.isEmpty,
            let pem = json["private_key"], let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem)
        else {
            throw RingRelayError(
                .badRequest, code: "invalid_service_account",
                "A service account needs client_email, project_id and an RSA private_key (PEM) of 2048 bits or more.")
        }
        registerServiceAccount(clientEmail: email, projectID: project, publicKey: key.publicKey, privateKeyID: json["private_key_id"])
    }

    /// Makes a new service account with a real 2048-bit RSA key, registers it, and returns its
    /// JSON fields as Google issues them, with `token_uri` pointing at this simulator.
    ///
    /// - Parameters:
    ///   - projectID: the Firebase project it sends to.
    ///   - privateKeyPEM: an RSA key to use instead of a new one (generating a 2048-bit key takes
    ///     a noticeable moment in debug builds; test suites may share one).
    /// - Throws: `RingRelayError` (`simulator_not_started`) before ``start()`` (the token URI needs
    ///   the port), or when the key cannot be generated or read.
    public func makeServiceAccount(projectID: String, privateKeyPEM: String? = nil) throws -> [String: String] {
        guard port != 0 else {
            throw RingRelayError(
                .conflict, code: "simulator_not_started", "Start the FCM simulator before making a service account; token_uri needs its port.")
        }
        let key = try privateKeyPEM.map { try _RSA.Signing.PrivateKey(pemRepresentation: $0) } ?? _RSA.Signing.PrivateKey(keySize: .bits2048)
        let keyID = (0..<20).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let suffix = String((0..<5).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement() ?? "a" })
        let email = "firebase-adminsdk-\(suffix)@\(projectID).iam.gserviceaccount.com"
        registerServiceAccount(clientEmail: email, projectID: projectID, publicKey: key.publicKey, privateKeyID: keyID)
        return [
            "type": "service_account",
            "project_id": projectID,
            "private_key_id": keyID,
            "private_key": key.pkcs8PEMRepresentation,
            "client_email": email,
            "client_id": String((0..<21).map { _ in "0123456789".randomElement() ?? "0" }),
            "auth_uri": url + "/o/oauth2/auth",
            "token_uri": tokenURL,
            "auth_provider_x509_cert_url": url + "/oauth2/v1/certs",
            "client_x509_cert_url": url + "/robot/v1/metadata/x509/" + (email.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? email),
            "universe_domain": "googleapis.com",
        ]
    }

    /// Makes a service account like ``makeServiceAccount(projectID:)`` and writes it as a JSON
    /// file (mode 0600), ready for `PUT /v1/credentials/fcm` as `{"serviceAccount": <file>}`.
    ///
    /// - Returns: the service account's fields.
    /// - Throws: as ``makeServiceAccount(projectID:)``, or the file system's error.
    @discardableResult
    public func writeServiceAccount(toFile path: String, projectID: String) throws -> [String: String] {
        let account = try makeServiceAccount(projectID: projectID)
        let json = try JSONSerialization.data(withJSONObject: account, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        let url = URL(fileURLWithPath: path)
        try json.write(to: url, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        return account
    }

    /// Signs an OAuth assertion for a service account the way Google's client libraries do
    /// (RS256, `kid` = `private_key_id`), for tests that talk to the token endpoint directly.
    ///
    /// - Parameters:
    ///   - serviceAccount: the service account's fields (``makeServiceAccount(projectID:)``).
    ///   - audience: `aud`; the account's `token_uri` by default.
    ///   - scope: `scope`, space-separated.
    ///   - issuedAt: `iat`.
    ///   - lifetime: `exp - iat`, in seconds.
    ///   - signingKeyPEM: signs with this key instead of the account's (to forge a signature).
    /// - Throws: when the key is missing or cannot sign.
    public static func makeAssertion(
        serviceAccount: [String: String], audience: String? = nil, scope: String = "https://www.googleapis.com/auth/firebase.messaging",
        issuedAt: Date = Date(), lifetime: Int = 3600, signingKeyPEM: String? = nil
    ) throws -> String {
        guard let pem = signingKeyPEM ?? serviceAccount["private_key"] else {
            throw RingRelayError(.badRequest, code: "invalid_service_account", "The service account has no private_key.")
        }
        let key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        var header = ["alg": "RS256", "typ": "JWT"]
        if let keyID = serviceAccount["private_key_id"] { header["kid"] = keyID }
        let iat = Int(issuedAt.timeIntervalSince1970.rounded(.down))
        let claims: [String: Any] = [
            "iss": serviceAccount["client_email"] ?? "", "scope": scope, "aud": audience ?? serviceAccount["token_uri"] ?? "",
            "iat": iat, "exp": iat + lifetime,
        ]
        func encode(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let input =
            encode(try JSONSerialization.data(withJSONObject: header, options: .sortedKeys)) + "."
            + encode(try JSONSerialization.data(withJSONObject: claims, options: .sortedKeys))
        let signature = try key.signature(for: Data(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + encode(signature.rawRepresentation)
    }

    // MARK: Scripting

    /// Scripts the answer to messages for one registration token.
    ///
    /// - Parameters:
    ///   - behaviour: what to do instead of (or, for ``Behaviour/delay(_:)``, before) the normal answer.
    ///   - token: the registration token.
    ///   - times: how many messages it applies to; `nil` until ``clearBehaviours()``.
    public func setBehaviour(_ behaviour: Behaviour, forRegistrationToken token: String, times: Int? = nil) {
        state.withLock { state in
            if let times, times <= 0 {
                state.behaviours[token] = nil
            } else {
                state.behaviours[token] = Scripted(value: behaviour, remaining: times)
            }
        }
    }

    /// Scripts the token endpoint's answer.
    ///
    /// - Parameters:
    ///   - failure: what to answer instead of a token.
    ///   - clientEmail: the service account it applies to; `nil` for every account.
    ///   - times: how many token requests it applies to; `nil` until ``clearBehaviours()``.
    public func setOAuthFailure(_ failure: OAuthFailure, forClientEmail clientEmail: String? = nil, times: Int? = nil) {
        state.withLock { state in
            let key = clientEmail ?? ""
            if let times, times <= 0 {
                state.oauthFailures[key] = nil
            } else {
                state.oauthFailures[key] = Scripted(value: failure, remaining: times)
            }
        }
    }

    /// Removes every scripted behaviour and token endpoint failure.
    public func clearBehaviours() {
        state.withLock {
            $0.behaviours.removeAll()
            $0.oauthFailures.removeAll()
        }
    }

    /// Forgets every issued access token, so the next send with one is answered 401 (as after
    /// Google revokes them).
    public func revokeAccessTokens() {
        state.withLock { $0.accessTokens.removeAll() }
    }

    // MARK: Inspection

    /// Every send request that reached request handling, in arrival order, rejected ones included.
    public var received: [ReceivedMessage] { state.withLock { $0.received } }

    /// Every token request, in arrival order.
    public var tokenRequests: [TokenRequest] { state.withLock { $0.tokenRequests } }

    /// How many access tokens were issued.
    public var tokenMints: Int { state.withLock { $0.tokenRequests.count(where: { $0.status == 200 }) } }

    /// How many TCP connections were accepted so far.
    public var connectionsAccepted: Int { listener.connectionsAccepted }

    /// Forgets ``received``, ``tokenRequests`` and every scripted behaviour (issued tokens stay valid).
    public func reset() {
        state.withLock {
            $0.received.removeAll()
            $0.tokenRequests.removeAll()
            $0.behaviours.removeAll()
            $0.oauthFailures.removeAll()
        }
    }

    /// Stops listening and closes every open connection. Safe to call more than once.
    ///
    /// - Throws: never in practice; closing errors of already-closed channels are ignored.
    public func shutdown() async throws {
        await listener.shutdown()
    }
}

// MARK: - State

/// A registered service account.
struct FCMRegisteredAccount: Sendable {
    var projectID: String
    var publicKey: _RSA.Signing.PublicKey
    var privateKeyID: String?
}

/// An issued access token.
struct FCMIssuedToken: Sendable {
    var clientEmail: String
    var projectID: String
    var expiresAt: Date
}

/// Everything mutable about an FCM simulator, kept under one lock.
struct FCMSimulatorState: Sendable {
    var received: [FCMSimulator.ReceivedMessage] = []
    var tokenRequests: [FCMSimulator.TokenRequest] = []
    var behaviours: [String: Scripted<FCMSimulator.Behaviour>] = [:]
    /// By client e-mail; "" applies to every account.
    var oauthFailures: [String: Scripted<FCMSimulator.OAuthFailure>] = [:]
    var serviceAccounts: [String: FCMRegisteredAccount] = [:]
    var accessTokens: [String: FCMIssuedToken] = [:]
    var messageCounter: UInt64 = 0
}

extension FCMSimulator {
    /// Takes one use of the behaviour scripted for `token`, if any.
    func takeBehaviour(forRegistrationToken token: String) -> Behaviour? {
        guard !token.isEmpty else { return nil }
        return state.withLock { Scripted.take(token, from: &$0.behaviours) }
    }

    /// Takes one use of the token endpoint failure scripted for `clientEmail` (or for every account).
    func takeOAuthFailure(forClientEmail clientEmail: String?) -> OAuthFailure? {
        state.withLock { state in
            for key in [clientEmail ?? "", ""] {
                if let failure = Scripted.take(key, from: &state.oauthFailures) { return failure }
            }
            return nil
        }
    }

    /// Appends a message to ``received`` and tells ``Configuration/onMessage``.
    func record(_ message: ReceivedMessage) {
        state.withLock { state in
            state.received.append(message)
            if let limit = configuration.maximumRecordedMessages, state.received.count > limit {
                state.received.removeFirst(state.received.count - max(limit, 0))
            }
        }
        configuration.onMessage?(message)
    }

    /// Appends a token request to ``tokenRequests`` and tells ``Configuration/onTokenRequest``.
    func record(_ request: TokenRequest) {
        state.withLock { state in
            state.tokenRequests.append(request)
            if let limit = configuration.maximumRecordedMessages, state.tokenRequests.count > limit {
                state.tokenRequests.removeFirst(state.tokenRequests.count - max(limit, 0))
            }
        }
        configuration.onTokenRequest?(request)
    }
}
