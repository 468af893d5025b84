import Foundation
import HTTPTypes
import HummingbirdTesting
import HummingbirdWSClient
import Logging
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

@testable import RingRelayServer

/// A WebSocket upgrade of `GET /v1/connect` that the server refuses is answered like any other
/// route's refusal (issue 42): 401 with `WWW-Authenticate: Bearer` for credentials that are
/// missing, invalid, expired or signed out, 403 for a credential of another kind, each with the
/// house error body naming which; the connection never upgrades and is closed after the answer.
/// (hummingbird-websocket answered them all `400` with an empty body.)
@Suite struct ConnectRefusalTests {
    /// One refused upgrade as a raw client sees it.
    struct Refusal {
        var status: Int
        var headers: [String: String]
        var code: String?
        var message: String?
        var closed: Bool
        var text: String
    }

    /// Sends a WebSocket upgrade request for `path` (with `authorization` as the header, if any)
    /// over a raw socket and reads until the server closes the connection.
    static func upgrade(port: Int, path: String, authorization: String? = nil) async throws -> Refusal {
        var request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let authorization { request += "Authorization: \(authorization)\r\n" }
        let answer = try await RawSocket.exchange(port: port, [Array((request + "\r\n").utf8)], timeout: .seconds(20))
        let parts = answer.text.components(separatedBy: "\r\n\r\n")
        let lines = parts[0].components(separatedBy: "\r\n")
        let status = lines.first?.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let body = parts.dropFirst().joined(separator: "\r\n\r\n")
        let error = try? JSONDecoder.ringRelay.decode(ErrorBody.self, from: Data(body.utf8)).error
        return Refusal(status: status, headers: headers, code: error?.code, message: error?.message, closed: answer.closed, text: answer.text)
    }

    @Test func refusedUpgradesAnswerWithTheirStatusAndErrorBody() async throws {
        let server = try await TestServer.make()
        try await server.withClient(.live) { client in
            let port = try #require(client.port)
            let account = try await client.createAccount("refusals", admin: server.adminToken)
            let key = account.apiKey
            let token = try await client.accessToken(identity: "bob", deviceID: "b1", key: key)
            let forged = String(token.dropLast(6)) + (token.hasSuffix("AAAAAA") ? "BBBBBB" : "AAAAAA")
            let shortLived = try await client.accessToken(identity: "bob", deviceID: "b2", key: key, ttl: 60)
            // b3 is signed out: its only binding is deleted after its token was minted.
            let signedOut = try await client.accessToken(identity: "bob", deviceID: "b3", key: key)
            let binding = try await client.createBinding(#"{"type":"fcm","token":"fcm-b3"}"#, token: signedOut)
            #expect(try await client.send(.delete, "/v1/bindings/\(binding.id)", token: key).status == .noContent)
            server.clock.advance(by: 61)

            let cases: [(what: String, path: String, authorization: String?, status: Int, code: String)] = [
                ("no token", "/v1/connect", nil, 401, "missing_credentials"),
                ("a malformed token", "/v1/connect?access_token=eyJ.not-a-token", nil, 401, "invalid_access_token"),
                ("a token that is no credential", "/v1/connect", "Bearer not-a-token-at-all", 401, "invalid_credentials"),
                ("a header that is not a bearer", "/v1/connect", "Basic Ym9iOnNlY3JldA==", 401, "invalid_credentials"),
                ("a forged token", "/v1/connect?access_token=\(forged)", nil, 401, "invalid_access_token"),
                ("an expired token", "/v1/connect", "Bearer \(shortLived)", 401, "expired_access_token"),
                ("a signed-out device's token", "/v1/connect?access_token=\(signedOut)", nil, 401, "device_signed_out"),
                ("an API key in the query", "/v1/connect?access_token=\(key)", nil, 401, "invalid_credentials"),
                ("an API key", "/v1/connect", "Bearer \(key)", 403, "forbidden"),
                ("the admin token", "/v1/connect", "Bearer \(server.adminToken)", 403, "forbidden"),
                ("a lastEventId that is no event id", "/v1/connect?access_token=\(token)&lastEventId=nope", nil, 422, "invalid_field"),
            ]
            for refused in cases {
                let answer = try await Self.upgrade(port: port, path: refused.path, authorization: refused.authorization)
                #expect(answer.status == refused.status, "\(refused.what): \(answer.text)")
                #expect(answer.code == refused.code, "\(refused.what): \(answer.text)")
                #expect(answer.message?.isEmpty == false, "\(refused.what): \(answer.text)")
                #expect(answer.headers["www-authenticate"] == (refused.status == 401 ? "Bearer" : nil), "\(refused.what): \(answer.text)")
                #expect(answer.headers["content-type"]?.hasPrefix("application/json") == true, "\(refused.what): \(answer.text)")
                #expect(answer.headers["x-request-id"].map(RequestIDs.isWellFormed) == true, "\(refused.what): \(answer.text)")
                #expect(answer.headers["connection"] == "close", "\(refused.what): \(answer.text)")
                #expect(answer.headers["upgrade"] == nil && answer.headers["sec-websocket-accept"] == nil, "\(refused.what): \(answer.text)")
                #expect(answer.closed, "\(refused.what): the connection stays open after the refusal")
            }

            // The same refusals through a real WebSocket client: it never gets a connection.
            for refused in [forged, signedOut, shortLived, key] {
                let opened = Mutex(false)
                await #expect(throws: (any Error).self) {
                    _ = try await WebSocketClient.connect(
                        url: "ws://127.0.0.1:\(port)/v1/connect?access_token=\(refused)", logger: TestLogging.logger("test-device", level: .critical)
                    ) { _, _, _ in opened.withLock { $0 = true } }
                }
                #expect(!opened.withLock { $0 })
            }

            // A later request with an Upgrade header goes the plain HTTP way: its own 400 is
            // written once, whole (the refused upgrade's replacement must not take it for the
            // library's bare 400). (A first request with an Upgrade header other than websocket
            // gets no answer at all from NIO's upgrade handler, as before.)
            let first = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            let h2c = Array(
                ("POST /v1/accounts HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nAuthorization: Bearer \(server.adminToken)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 1\r\n\r\n{").utf8)
            let plain = try await RawSocket.exchange(port: port, [first, h2c], timeout: .seconds(3))
            let answers = plain.text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { "HTTP/1.1 " + $0 }
            #expect(answers.count == 2, "\(plain.text)")
            let second = answers.last ?? ""
            #expect(second.hasPrefix("HTTP/1.1 400 ") && second.contains(#""code":"malformed_json""#), "\(plain.text)")
            let length = try #require(RequestLogTests.header("Content-Length", in: second).flatMap { Int($0) }, "\(plain.text)")
            #expect(second.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n").utf8.count == length, "\(plain.text)")

            // A good token still upgrades, and the device is served.
            let device = try await LiveDevice.connect(port: port, token: token)
            #expect(device.ready?.deviceId == "b1")
            await device.close()
        }
    }
}
