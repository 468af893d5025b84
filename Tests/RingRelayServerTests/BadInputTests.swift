import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayWire
import Testing

@Suite struct BadInputTests {
    @Test func everyBadInputClassGetsItsStatus() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let big = String(repeating: "x", count: 64 * 1024 + 1)
            let cases: [(String?, String?, HTTPResponse.Status, String)] = [
                (#"{"identity":"\#(big)","type":"fcm","token":"t"}"#, "application/json", .contentTooLarge, "body_too_large"),
                (#"{"identity":"b","type":"fcm","token":"t"}"#, "text/plain", .unsupportedMediaType, "unsupported_media_type"),
                (#"{"identity":"b","type":"fcm","token":"t"}"#, nil, .unsupportedMediaType, "unsupported_media_type"),
                (#"{"identity":"b","#, "application/json", .badRequest, "malformed_json"),
                ("", "application/json", .badRequest, "empty_body"),
                ("\u{FF}\u{FE}", "application/json", .badRequest, "malformed_json"),
                ("null", "application/json", .unprocessableContent, "invalid_body"),
            ]
            for (body, contentType, status, code) in cases {
                let response = try await client.send(.post, "/v1/bindings", token: key, json: body, contentType: contentType)
                #expect(response.status == status, "\(code)")
                #expect(response.errorCode == code)
            }
            let charset = try await client.send(
                .post, "/v1/bindings", token: key, json: #"{"identity":"b","type":"fcm","token":"t"}"#,
                contentType: "application/json; charset=utf-8")
            #expect(charset.status == .created)
            #expect(try await client.send(.get, "/v1/nothing-here", token: key).errorCode == "route_not_found")
            #expect(try await client.send(.get, "/v1/bindings?limit=0", token: key).errorCode == "invalid_parameter")
            #expect(try await client.send(.get, "/v1/bindings?limit=abc", token: key).errorCode == "invalid_parameter")
            #expect(try await client.send(.get, "/v1/bindings?type=sms", token: key).errorCode == "invalid_parameter")
            #expect(try await client.send(.delete, "/v1/bindings", token: key).errorCode == "missing_parameter")
        }
    }

    /// Raw bytes the HTTP/1 parser refuses, on a real socket: a `400 invalid_request` at once and the
    /// connection closed, on plain routes and on the WebSocket upgrade route alike (before, the
    /// connection stayed open with no answer, forever).
    @Test func unparsableRequestLinesAreAnsweredAndClosed() async throws {
        let server = try await TestServer.make()
        try await server.withClient(.live) { client in
            let port = try #require(client.port)
            // The test client's own connection is used first: left unused through the raw
            // exchanges below, a slow machine could pass the header timeout on it.
            #expect(try await client.send(.get, "/healthz").status == .ok)
            let upgrade = Array("Host: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8)
            let requests: [[UInt8]] = [
                Array("GET /healthz?x=".utf8) + [0xFF] + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8),
                Array("GET /".utf8) + [0xFF] + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8),
                Array("POST /v1/webhooks/twilio/".utf8) + [0xC3, 0x28] + Array(" HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n".utf8),
                Array("GET /v1/connect?access_token=".utf8) + [0xFF] + Array(" HTTP/1.1\r\n".utf8) + upgrade,
                Array("GET /healthz HTTP/1.1\r\nHost: a\r\nX-Bad: ".utf8) + [0x00] + Array("\r\n\r\n".utf8),
            ]
            for request in requests {
                let answer = try await RawSocket.exchange(port: port, [request])
                #expect(answer.text.hasPrefix("HTTP/1.1 400 "), "\(answer.text)")
                #expect(answer.text.contains(#""code":"invalid_request""#), "\(answer.text)")
                #expect(answer.closed, "the connection is closed after the answer")
            }
            // A bad request after a good one on the same connection gets the same answer, after
            // the good one's, whether it comes later or in the same packet; then the connection closes.
            let good = Array("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
            let bad = Array("GET /".utf8) + [0xFF] + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
            for exchange in [[good, bad], [good + bad]] {
                let answer = try await RawSocket.exchange(port: port, exchange)
                let answers = answer.text.components(separatedBy: "HTTP/1.1 ").dropFirst()
                #expect(answers.map { $0.prefix(4) } == ["200 ", "400 "], "\(answer.text)")
                #expect(answers.last?.contains(#""code":"invalid_request""#) == true, "\(answer.text)")
                #expect(answers.last?.lowercased().contains("x-request-id: ") == true, "\(answer.text)")
                #expect(answer.closed)
            }
            // The server is still answering.
            #expect(try await client.send(.get, "/healthz").status == .ok)
        }
    }

    /// Once a request is answered, the rest of its body is not read to its end (Hummingbird would,
    /// with no limit): a refused request that declares 100 MiB (a POST over its limit, a DELETE,
    /// which takes no body) is answered 413 and its connection closed after at most 64 KiB more.
    @Test func anAnsweredRequestsBodyIsNotReadToItsEnd() async throws {
        let server = try await TestServer.make()
        try await server.withClient(.live) { client in
            let port = try #require(client.port)
            let admin = server.adminToken
            let account = try await client.createAccount("acme", admin: admin)
            let key = try await client.send(.post, "/v1/accounts/\(account.id)/keys", token: admin).decode(CreatedKey.self)
            for line in ["POST /v1/accounts", "DELETE /v1/accounts/\(account.id)/keys/\(key.id)"] {
                let head = "\(line) HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer \(admin)\r\nContent-Type: application/json\r\nContent-Length: \(100 << 20)\r\n\r\n"
                let (answer, pieces) = try await RawSocket.pour(
                    port: port, head: Array(head.utf8), piece: Array(repeating: 0x20, count: 64 << 10), every: .zero, count: 1600, within: .seconds(60))
                #expect(answer.text.hasPrefix("HTTP/1.1 413 ") && answer.text.contains(#""code":"body_too_large""#), "\(line): \(answer.text.prefix(300))")
                #expect(answer.closed, "\(line)")
                // Socket buffers take some MiB more before the writes fail; all 100 went without the limit.
                #expect(pieces < 400, "\(line): \(pieces) pieces of 64 KiB went before the connection closed")
            }
            // A chunked body is refused at its first piece, and a small one leaves the connection usable.
            let chunked = "DELETE /v1/accounts/\(account.id)/keys/\(key.id) HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer \(admin)\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
            let answer = try await RawSocket.exchange(port: port, [Array(chunked.utf8), Array("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".utf8)])
            let answers = answer.text.components(separatedBy: "HTTP/1.1 ").dropFirst()
            #expect(answers.map { $0.prefix(4) } == ["413 ", "200 "], "\(answer.text)")
            #expect(try await client.send(.get, "/v1/bindings", token: key.apiKey).status == .ok, "the key was revoked")
        }
    }

    /// Random and mutated bodies against every endpoint that reads one: never a 5xx, and the
    /// server keeps answering.
    @Test func noBodyProducesAServerError() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let account = try await client.createAccount("acme", admin: server.adminToken)
            let endpoints: [(HTTPRequest.Method, String, String)] = [
                (.post, "/v1/accounts", server.adminToken),
                (.post, "/v1/bindings", account.apiKey),
                (.post, "/v1/bindings/batch", account.apiKey),
                (.post, "/v1/access-tokens", account.apiKey),
                (.put, "/v1/credentials/apns", account.apiKey),
                (.put, "/v1/credentials/fcm", account.apiKey),
                (.put, "/v1/credentials/twilio", account.apiKey),
                (.put, "/v1/credentials/webex", account.apiKey),
            ]
            let seeds = [
                #"{"identity":"bob","type":"fcm","token":"t"}"#, #"{"upsert":[{"identity":"b","type":"fcm","token":"t"}],"delete":["x"]}"#,
                #"{"serviceAccount":{"client_email":"a@b","private_key":"k","project_id":"p","token_uri":"https://x"}}"#,
                #"{"teamId":"ABCDE12345","keyId":"ABCDE12345","privateKey":"-----BEGIN PRIVATE KEY-----","topic":"com.x"}"#,
                #"{"accountSid":"AC00000000000000000000000000000000","authToken":"0123456789abcdef"}"#, #"{"name":"n","secret":[1,{}]}"#,
                "[]", "{}", "0", "true", #"{"upsert":{}}"#, #"{"upsert":[null,[],"x"],"delete":[1]}"#, #"{"ttlSeconds":1e308}"#,
                #"{"identity":null,"deviceId":{}}"#, #"{"serviceAccount":[]}"#, "\"\\ud800\"", #"{"a":"\u0000"}"#,
            ]
            var generator = SystemRandomNumberGenerator()
            for (method, path, token) in endpoints {
                for seed in seeds {
                    var bytes = Array(seed.utf8)
                    for round in 0..<4 {
                        if round > 0, !bytes.isEmpty {
                            // Flip, drop or duplicate a byte.
                            let index = Int.random(in: 0..<bytes.count, using: &generator)
                            switch round {
                            case 1: bytes[index] = UInt8.random(in: 0...255, using: &generator)
                            case 2: bytes.remove(at: index)
                            default: bytes.insert(bytes[index], at: index)
                            }
                        }
                        var headers = HTTPFields()
                        headers[.authorization] = "Bearer \(token)"
                        headers[.contentType] = "application/json"
                        let response = try await client.execute(uri: path, method: method, headers: headers, body: ByteBuffer(bytes: bytes))
                        #expect(response.status.code < 500, "\(method) \(path) \(String(decoding: bytes, as: UTF8.self)) → \(response.status)")
                    }
                }
            }
            #expect(try await client.send(.get, "/readyz").status == .ok)
        }
    }
}
