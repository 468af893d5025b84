import Foundation
import HummingbirdTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// A live server for call-rule tests: one account, its devices with access tokens, and live
/// connections for those connected. No rate limit, and a live ring never falls back to push.
struct ConnectedDevices: Sendable {
    let server: TestServer
    let client: any TestClientProtocol
    /// The account's API key.
    let key: String
    /// Each device's access token, by device id.
    let tokens: [String: String]
    /// The connected devices, by device id.
    let devices: [String: LiveDevice]

    /// Runs `body` with `devices` (device id → identity) registered, connecting those in `connected`
    /// (every one when `nil`), and closes the connections afterwards.
    static func with(
        _ devices: KeyValuePairs<String, String>, connected: Set<String>? = nil, _ body: @Sendable (ConnectedDevices) async throws -> Void
    ) async throws {
        var server = try await TestServer.make(start: Date())
        server.configuration.rateLimit = 0
        server.configuration.liveFallback = .seconds(30)  // every device is connected: no push fallback
        let configured = server
        let named = Array(devices)
        try await configured.withClient(.live) { client in
            let key = try await client.createAccount("acme", admin: configured.adminToken).apiKey
            let port = try #require(client.port)
            var tokens: [String: String] = [:]
            var live: [String: LiveDevice] = [:]
            for (device, identity) in named {
                tokens[device] = try await client.accessToken(identity: identity, deviceID: device, key: key)
                if connected?.contains(device) ?? true { live[device] = try await LiveDevice.connect(port: port, token: tokens[device] ?? "") }
            }
            try await body(ConnectedDevices(server: configured, client: client, key: key, tokens: tokens, devices: live))
            for device in live.values { await device.close() }
        }
    }
}
