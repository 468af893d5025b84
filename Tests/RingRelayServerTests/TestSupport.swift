import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Crypto
import Logging
import NIOCore
import NIOFoundationEssentialsCompat
import RingRelayAPNs
import RingRelayCore
import RingRelayFCM
import RingRelayStore
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// One test's server: a real SQLite file in a fresh directory, a manual clock and a known admin token.
struct TestServer {
    let directory: TemporaryDirectory
    let store: SQLiteStore
    let clock: ManualWallClock
    let adminToken = "test-admin-token-0123456789abcdef"
    /// The server's settings, with the limits a test does not test out of its way: admission
    /// control (a test's server shares the process's event loops with every other test running,
    /// so their lateness says nothing of it; tested on servers of their own in `AdmissionTests`
    /// and `ClusterTests`), the rate budgets and the bindings an identity may have (fan-out tests
    /// register thousands). Tests of those set them.
    var configuration: ServerConfiguration = {
        var configuration = ServerConfiguration()
        configuration.overloadDelay = .seconds(3600)
        configuration.rateLimit = 0
        configuration.maxBindingsPerIdentity = 100_000
        return configuration
    }()

    /// A server whose clock starts at `start` (a fixed date by default; pushes need the real date,
    /// because push services check token times against their own clocks).
    /// `running` makes the clock move with real time too (see ``ManualWallClock``).
    static func make(start: Date = Date(timeIntervalSince1970: 1_790_000_000), running: Bool = false) async throws -> TestServer {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteStore.open(path: directory.appending("ringrelay.sqlite"), logger: TestLogging.logger("test"))
        return TestServer(directory: directory, store: store, clock: ManualWallClock(start: start, running: running))
    }

    /// Runs `body` against the application through the router (no socket), then cleans up.
    ///
    /// - Parameter logger: the server's logger; by default one that shows warnings and worse.
    func withClient<T: Sendable>(
        _ setup: TestingSetup = .router, logger: Logger? = nil, _ body: @Sendable (any TestClientProtocol) async throws -> T
    ) async throws -> T {
        defer { directory.remove() }
        var configuration = self.configuration
        configuration.port = 0
        let logger = logger ?? TestLogging.logger("test", level: .warning)
        let app = try await buildApplication(
            configuration: configuration, store: store, adminToken: adminToken, clock: clock, logger: logger)
        do {
            let result = try await app.test(setup, body)
            try await store.close()
            return result
        } catch {
            // Close even when the test failed, so one failure does not take the process down.
            try? await store.close()
            throw error
        }
    }
}

extension TestServer {
    static let bundleID = "com.example.app"

    /// A server pointed at a started simulator, with an account whose APNs key the simulator knows.
    static func withPushServer(
        _ setup: TestingSetup = .router,
        configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable (TestServer, APNsSimulator, any TestClientProtocol, String) async throws -> Void
    ) async throws {
        let simulator = try APNsSimulator()
        try await simulator.start()
        var configured = try await TestServer.make(start: Date())
        try configured.pushThrough(simulator)
        configured.configuration.apns.requestTimeout = .seconds(10)
        configured.configuration.apns.retryBaseDelay = .milliseconds(5)
        configure(&configured.configuration)
        let server = configured
        let credential = TestServer.apnsCredential(knownTo: simulator)
        try await server.withClient(setup) { client in
            let apiKey = try await client.createAccount("acme", admin: server.adminToken).apiKey
            #expect(try await client.send(.put, "/v1/credentials/apns", token: apiKey, json: credential).status == .ok)
            try await body(server, simulator, client, apiKey)
        }
        try await simulator.shutdown()
    }

    /// Points the server's APNs client at `simulator`, trusting its certificate.
    mutating func pushThrough(_ simulator: APNsSimulator) throws {
        let caFile = directory.appending("apns-simulator.pem")
        try simulator.writeCertificate(toFile: caFile)
        configuration.apns.productionEndpoint = simulator.url
        configuration.apns.sandboxEndpoint = simulator.url
        configuration.apns.extraTrustRootsFile = caFile
    }

    /// Points the server's FCM client at `simulator`, trusting its certificate.
    mutating func pushThrough(_ simulator: FCMSimulator) throws {
        let caFile = directory.appending("fcm-simulator.pem")
        try simulator.writeCertificate(toFile: caFile)
        configuration.fcm.endpoint = simulator.url
        configuration.fcm.extraTrustRootsFile = caFile
    }

    /// The body of `PUT /v1/credentials/apns` for a new token key that `simulator` knows.
    static func apnsCredential(knownTo simulator: APNsSimulator) -> String {
        let key = P256.Signing.PrivateKey()
        simulator.registerSigningKey(teamID: "TEAM123456", keyID: "KEY1234567", publicKey: key.publicKey, topics: [bundleID])
        let body: [String: String] = ["teamId": "TEAM123456", "keyId": "KEY1234567", "privateKey": key.pemRepresentation, "topic": bundleID]
        return String(decoding: (try? JSONSerialization.data(withJSONObject: body)) ?? Data(), as: UTF8.self)
    }
}

extension TestClientProtocol {
    /// Sends a request with an optional bearer token and JSON body.
    @discardableResult
    func send(
        _ method: HTTPRequest.Method, _ uri: String, token: String? = nil, json: String? = nil,
        contentType: String? = "application/json"
    ) async throws -> TestResponse {
        var headers = HTTPFields()
        if let token { headers[.authorization] = "Bearer \(token)" }
        if json != nil, let contentType { headers[.contentType] = contentType }
        return try await execute(uri: uri, method: method, headers: headers, body: json.map { ByteBuffer(string: $0) })
    }

    /// Creates an account with the admin token and returns it with its key.
    func createAccount(_ name: String, admin: String) async throws -> CreatedAccount {
        let response = try await send(.post, "/v1/accounts", token: admin, json: #"{"name":"\#(name)"}"#)
        #expect(response.status == .created)
        return try response.decode(CreatedAccount.self)
    }

    /// Registers a binding and returns it.
    func createBinding(_ body: String, token: String, expect status: HTTPResponse.Status = .created) async throws -> BindingResource {
        let response = try await send(.post, "/v1/bindings", token: token, json: body)
        #expect(response.status == status, "\(String(buffer: response.body))")
        return try response.decode(BindingResource.self)
    }

    /// Mints a device access token.
    func accessToken(identity: String, deviceID: String = "device-1", key: String, ttl: Int? = nil) async throws -> String {
        let ttlField = ttl.map { #","ttlSeconds":\#($0)"# } ?? ""
        let response = try await send(
            .post, "/v1/access-tokens", token: key, json: #"{"identity":"\#(identity)","deviceId":"\#(deviceID)"\#(ttlField)}"#)
        #expect(response.status == .created)
        return try response.decode(AccessTokenResponse.self).token
    }
}

extension TestResponse {
    /// Decodes the JSON body.
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder.ringRelay.decode(type, from: Data(buffer: body))
    }

    /// The `error.code` of an error body.
    var errorCode: String? {
        (try? JSONDecoder.ringRelay.decode(ErrorBody.self, from: Data(buffer: body)))?.error.code
    }

    /// The `error.message` of an error body.
    var errorMessage: String? {
        (try? JSONDecoder.ringRelay.decode(ErrorBody.self, from: Data(buffer: body)))?.error.message
    }
}

/// A valid APNs token: `bytes` bytes as hex, varied by `seed`.
func apnsToken(seed: Int, bytes: Int = 32) -> String {
    (0..<bytes).map { String(format: "%02x", ($0 &* 7 &+ seed &* 31) & 0xFF) }.joined()
}
