import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import RingRelayWire
import Synchronization
import Testing

@testable import RingRelayServer

/// Request ids and the access log (issue 19 item 13): every answer carries `X-Request-Id`, and the
/// log lines the request causes carry the same id.
@Suite struct RequestLogTests {
    /// The lines a ``LineLogHandler`` (JSON) wrote, parsed.
    final class Lines: Sendable {
        private let text = Mutex("")

        /// A server logger (at `level`) writing JSON lines here.
        func logger(level: Logger.Level = .info) -> Logger {
            var logger = Logger(label: "ringrelay") { label in LineLogHandler(label: label, format: .json) { line in self.text.withLock { $0 += line } } }
            logger.logLevel = level
            return logger
        }

        var raw: String { text.withLock { $0 } }

        /// Each line as a JSON object; a line that is not one fails the test.
        var objects: [[String: Any]] {
            raw.split(separator: "\n").compactMap { line in
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object != nil, "not a JSON object: \(line)")
                return object
            }
        }

        /// The metadata of the lines with `message`.
        func metadata(of message: String) -> [[String: String]] {
            objects.filter { $0["message"] as? String == message }.compactMap { $0["metadata"] as? [String: String] }
        }
    }

    static let requestID = HTTPField.Name("X-Request-Id")!

    @Test func everyAnswerCarriesAnIDThatItsLogLinesEcho() async throws {
        let lines = Lines()
        var server = try await TestServer.make()
        server.configuration.accessLog = true
        let admin = server.adminToken
        try await server.withClient(logger: lines.logger()) { client in
            let account = try await client.createAccount("acme", admin: admin)
            let answers = [
                try await client.send(.get, "/v1/bindings?identity=alice&limit=5", token: account.apiKey),
                try await client.send(.get, "/v1/bindings/bnd_06h0aq62nap61qw7f0djc675g0", token: account.apiKey),
                try await client.send(
                    .post, "/v1/bindings", token: account.apiKey, json: #"{"identity":"bob","type":"fcm","token":"secret-push-token"}"#),
                try await client.send(.get, "/v1/no-such-route"),
                try await client.send(.get, "/v1/accounts", token: "wrong-token-0123456789"),
                // A webhook for a callee nobody registered: the ringer's own line gets the id too.
                try await WebhookTests.postTwilio(
                    client, accountID: try await WebhookTests.configureProviders(client, key: account.apiKey, admin: admin),
                    body: WebhookTests.twilioBody(to: "client:nobody")),
            ]
            let ids = answers.map { $0.headers[Self.requestID] }
            #expect(ids.allSatisfy { $0.map(RequestIDs.isWellFormed) == true }, "\(ids)")
            #expect(Set(ids).count == ids.count, "ids repeat: \(ids)")

            let access = Dictionary(lines.metadata(of: "request").map { ($0["request.id"] ?? "", $0) }) { first, _ in first }
            let expected: [(method: String, route: String, status: Int)] = [
                ("GET", "/v1/bindings", 200), ("GET", "/v1/bindings/{bindingId}", 404), ("POST", "/v1/bindings", 201),
                ("GET", "NotFound", 404), ("GET", "/v1/accounts", 401), ("POST", "/v1/webhooks/twilio/{accountId}", 404),
            ]
            for (answer, want) in zip(answers, expected) {
                #expect(answer.status.code == want.status, "\(want.route): \(String(buffer: answer.body))")
                let line = try #require(access[answer.headers[Self.requestID] ?? ""], "no access line for \(want.route)")
                #expect(line["http.method"] == want.method)
                #expect(line["http.route"] == want.route, "\(line)")
                #expect(line["http.status"] == String(want.status))
                #expect(Double(line["http.duration_ms"] ?? "") != nil, "\(line)")
            }
            let unreachable = try #require(lines.metadata(of: "no reachable device").first)
            #expect(unreachable["request.id"] == answers[5].headers[Self.requestID])
            // Routes, never paths, queries, tokens or bodies.
            for secret in [account.apiKey, "wrong-token-0123456789", "secret-push-token", "bnd_06h0aq62nap61qw7f0djc675g0", "limit=5"] {
                #expect(!lines.raw.contains(secret), "the log shows '\(secret)'")
            }
        }
    }

    /// The answers no route writes carry an id too: a refused WebSocket upgrade's answer (the
    /// router's 401, written in place of hummingbird-websocket's own, with the id its access log
    /// line has), and the 400 for a request that is not HTTP.
    @Test func answersNoRouteWritesCarryAnIDToo() async throws {
        let lines = Lines()
        var server = try await TestServer.make()
        server.configuration.accessLog = true
        try await server.withClient(.live, logger: lines.logger()) { client in
            let port = try #require(client.port)
            let upgrade = Array(
                ("GET /v1/connect HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer not-a-token\r\n\r\n").utf8)
            let refused = try await RawSocket.exchange(port: port, [upgrade])
            #expect(refused.text.hasPrefix("HTTP/1.1 401 "), "\(refused.text)")
            #expect(refused.text.contains(#""code":"invalid_credentials""#), "\(refused.text)")
            let id = try #require(Self.header("X-Request-Id", in: refused.text), "\(refused.text)")
            #expect(RequestIDs.isWellFormed(id))
            let logged = try #require(lines.metadata(of: "request").first { $0["request.id"] == id }, "\(lines.raw)")
            #expect(logged["http.route"] == "/v1/connect")

            // Not HTTP as the first request (UnparsableRequestGuard answers) and after a good one
            // (Hummingbird answers).
            let garbage = Array("GET /\u{01} HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            let unparsable = try await RawSocket.exchange(port: port, [garbage])
            #expect(unparsable.text.hasPrefix("HTTP/1.1 400 "), "\(unparsable.text)")
            #expect(Self.header("X-Request-Id", in: unparsable.text).map(RequestIDs.isWellFormed) == true, "\(unparsable.text)")
            let second = try await RawSocket.exchange(port: port, [Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8), garbage])
            let answers = second.text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { "HTTP/1.1 " + $0 }
            #expect(answers.count == 2 && answers[1].hasPrefix("HTTP/1.1 400 "), "\(second.text)")
            #expect(answers.compactMap { Self.header("X-Request-Id", in: $0) }.count == 2, "\(second.text)")
        }
    }

    /// A header's value in a raw HTTP/1.1 answer.
    static func header(_ name: String, in answer: String) -> String? {
        answer.components(separatedBy: "\r\n\r\n").first?.components(separatedBy: "\r\n").dropFirst()
            .first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
    }

    @Test func theAccessLogIsOffByDefault() async throws {
        let lines = Lines()
        let server = try await TestServer.make()
        try await server.withClient(logger: lines.logger()) { client in
            let answer = try await client.send(.get, "/healthz")
            #expect(answer.headers[Self.requestID] != nil)
            #expect(lines.metadata(of: "request").isEmpty, "\(lines.raw)")
        }
    }

    /// A proxy's `X-Request-Id` becomes the request's id only with `--trust-proxy`, and only when
    /// it is well-formed; otherwise clients cannot choose what our logs say.
    @Test func aProxysRequestIDIsKeptOnlyWhenTrusted() async throws {
        for trustProxy in [false, true] {
            let lines = Lines()
            var server = try await TestServer.make()
            server.configuration.trustProxy = trustProxy
            server.configuration.accessLog = true
            try await server.withClient(logger: lines.logger()) { client in
                for (sent, kept) in [
                    ("nginx-7f3a9c:42/req=1", trustProxy), ("has space", false), (String(repeating: "a", count: 129), false), ("", false),
                ] {
                    let answer = try await client.execute(uri: "/healthz", method: .get, headers: [Self.requestID: sent], body: nil)
                    let id = try #require(answer.headers[Self.requestID])
                    #expect((id == sent) == kept, "trust-proxy \(trustProxy): sent '\(sent)', answered '\(id)'")
                    #expect(RequestIDs.isWellFormed(id))
                    #expect(lines.metadata(of: "request").last?["request.id"] == id)
                }
            }
        }
    }
}
