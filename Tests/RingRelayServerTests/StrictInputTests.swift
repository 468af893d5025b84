import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayWire
import Testing

@testable import RingRelayServer

/// Strict input (issue 19 item 10): bodies are JSON as RFC 8259 defines it with no member named
/// twice, and query parameters are refused like unknown body fields.
@Suite struct StrictInputTests {
    static let nested = String(repeating: "[", count: StrictJSON.maximumDepth) + String(repeating: "]", count: StrictJSON.maximumDepth)

    @Test(arguments: [
        #"{}"#, #"[]"#, #""text""#, "0", "-0.5e+10", " \t\r\n{\"a\" : [1, -0, 0.25, 1E3, 2e-2, true, false, null]} \n",
        #"{"text":"é\u00e9\ud83d\ude00 \n\"\\\/\b\f\r\t"}"#,
        // The same name in different objects, and names that are canonically equivalent but
        // different code units (RFC 8259 compares names code unit by code unit).
        #"{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}"#, "{\"\u{E9}\":1,\"e\u{301}\":2}",
        nested,
    ])
    func strictJSONIsAccepted(_ text: String) throws {
        try StrictJSON.validate(Data(text.utf8))
        // Nothing accepted here that Foundation's parser refuses.
        _ = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }

    /// Texts refused, with the problem named.
    static let refusedTexts: [(text: String, problem: String)] = [
        (#"{"a":1,}"#, "a trailing comma before '}' (byte 6)"),
        (#"[1, 2 , ]"#, "a trailing comma before ']' (byte 6)"),
        (#"{"a":1,"a":2}"#, "the member name 'a' twice in one object (byte 7)"),
        (#"{"b":{"ab":1,"\u0061b":2}}"#, "the member name 'ab' twice in one object (byte 13)"),
        ("\u{FEFF}{}", "a byte order mark; send UTF-8 without one (byte 0)"),
        ("{\"a\":\"x\ty\"}", "a control character in a string; escape it (\\n, \\t, \\u00XX) (byte 7)"),
        (#"{"a":01}"#, "a number with a leading zero (byte 6)"),
        (#"{"a":1.}"#, "a number without digits after '.' (byte 7)"),
        (#"{"a":1e+}"#, "a number without digits in its exponent (byte 8)"),
        (#"{"a":-}"#, "a '-' without digits (byte 6)"),
        (#"{"a":+1}"#, "'+' where a value should start (byte 5)"),
        (#"{"a":"\x"}"#, "the escape '\\x', which JSON does not have (byte 6)"),
        (#"{"a":"\u12g4"}"#, "'g' in a \\u escape, which needs four hex digits (byte 10)"),
        (#"{"a":"\ud800"}"#, "a lone surrogate escape (byte 6)"),
        (#"{"a":"\udc00"}"#, "a lone surrogate escape (byte 6)"),
        (#"{"a":NaN}"#, "'N' where a value should start (byte 5)"),
        (#"{"a":tru}"#, "a word that is not a value where a value should start; JSON has only true, false and null (byte 5)"),
        (#"{"a":1} x"#, "'x' after the JSON value (byte 8)"),
        (#"{"a":1}{}"#, "'{' after the JSON value (byte 7)"),
        (#"{a:1}"#, "'a' where a member name in double quotes should be (byte 1)"),
        (#"{'a':1}"#, "''' where a member name in double quotes should be (byte 1)"),
        (#"{"a" 1}"#, "'1' where ':' should be (byte 5)"),
        (#"{"a":1 "b":2}"#, "'\"' where ',' or '}' should be (byte 7)"),
        (#"[1 /* no */]"#, "'/' where ',' or ']' should be (byte 3)"),
        (#"{"a":"x}"#, "a string without its closing quote (byte 5)"),
        (#"{"a":"#, "the text ends in the middle of a value (byte 5)"),
        (#"{"a":[1,"#, "the text ends in the middle of a value (byte 8)"),
        (" \n", "no JSON value (byte 2)"),
        ("[" + nested + "]", "more than 512 levels of nesting (byte 512)"),
        // Names are compared one by one in small objects and hashed in large ones: both find a repeat,
        // the first name of many and the one whose arrival made the object large.
        repeated("m3", after: 20), repeated("m16", after: 17), repeated("m15", after: 16),
    ]

    /// An object of `count` members `m0`, `m1`, … followed by `name` again, and the problem it has.
    static func repeated(_ name: String, after count: Int) -> (text: String, problem: String) {
        let prefix = "{" + (0..<count).map { #""m\#($0)":\#($0),"# }.joined()
        return (prefix + #""\#(name)":0}"#, "the member name '\(name)' twice in one object (byte \(prefix.utf8.count))")
    }

    /// Bytes refused, written as bytes.
    static let refusedBytes: [(bytes: [UInt8], problem: String)] = [
        ([0x22, 0xC3, 0x28, 0x22], "bytes that are not UTF-8 (byte 1)"),
        ([0x22, 0xC0, 0xAF, 0x22], "bytes that are not UTF-8 (byte 1)"),
        ([0x22, 0xED, 0xA0, 0x80, 0x22], "bytes that are not UTF-8 (byte 1)"),
        ([0x22, 0xF0, 0x9F, 0x98], "bytes that are not UTF-8 (byte 1)"),
        ([0x5B, 0x00, 0x5D], "byte 0x0 where a value should start (byte 1)"),
    ]

    @Test(arguments: refusedTexts.map { (Array($0.text.utf8), $0.problem) } + refusedBytes)
    func laxJSONIsRefusedNamingTheProblem(_ bytes: [UInt8], problem: String) {
        let error = #expect(throws: JSONSyntaxError.self) { try StrictJSON.validate(bytes) }
        #expect(error?.description == problem)
    }

    /// Every refused text is refused by the one-pass reader of flat objects too, naming the same problem.
    @Test(arguments: refusedTexts.map { (Array($0.text.utf8), $0.problem) } + refusedBytes)
    func stringMembersRefuseWhatValidateRefuses(_ bytes: [UInt8], problem: String) {
        let error = #expect(throws: JSONSyntaxError.self) { try StrictJSON.stringMembers(bytes) }
        #expect(error?.description == problem)
    }

    /// An object of strings reads as Foundation's parser reads it; any other JSON text reads as none.
    @Test func stringMembersAreWhatFoundationReads() throws {
        let flat = [
            #"{}"#,
            #" { "twi_to" : "client:alice", "twi_from":"+15551230000" } "#,
            #"{"text":"é\u00e9\ud83d\ude00 \n\"\\\/\b\f\r\t","empty":"","k\u0061y":"\u0000"}"#,
            "{\"\u{E9}\":\"precomposed\",\"name\":\"e\u{301} 日本 😀\"}",
        ]
        for text in flat {
            let members = try #require(try StrictJSON.stringMembers(Array(text.utf8)), "\(text)")
            let foundation = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String])
            #expect(members == foundation, "\(text)")
        }
        for text in [#"[]"#, #""text""#, "0", "null", #"{"a":"x","b":1}"#, #"{"a":{"b":"c"}}"#, #"{"a":["b"]}"#, #"{"a":null}"#] {
            #expect(try StrictJSON.stringMembers(Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test func lenientBodiesAreRefusedWith400() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            let trailing = try await client.send(.post, "/v1/bindings", token: key, json: #"{"identity":"bob","type":"fcm","token":"t",}"#)
            #expect(trailing.status == .badRequest)
            #expect(trailing.errorCode == "malformed_json")
            #expect(
                String(buffer: trailing.body).contains("The body is not valid JSON: a trailing comma before '}' (byte 42)."),
                "\(String(buffer: trailing.body))")
            // Which identity would it be? JSONDecoder alone took the last one.
            let twice = try await client.send(
                .post, "/v1/bindings", token: key, json: #"{"identity":"bob","type":"fcm","token":"t","identity":"eve"}"#)
            #expect(twice.status == .badRequest)
            #expect(String(buffer: twice.body).contains("the member name 'identity' twice in one object"))
            let nested = try await client.send(
                .post, "/v1/bindings/batch", token: key, json: #"{"upsert":[{"identity":"bob","type":"fcm","token":"t","token":"u"}]}"#)
            #expect(nested.status == .badRequest)
            #expect(nested.errorCode == "malformed_json")
            #expect(try await client.send(.get, "/v1/bindings", token: key).decode(BindingList.self).data.isEmpty)
            // Bodies of operations that take none are held to the same rule.
            let empty = try await client.send(
                .post, "/v1/accounts/\(try await Self.accountID(client, admin: server.adminToken))/keys", token: server.adminToken, json: "{,}")
            #expect(empty.status == .badRequest)
            #expect(empty.errorCode == "malformed_json")
        }
    }

    @Test func unknownQueryParametersAreRefusedLikeUnknownFields() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let admin = server.adminToken
            let key = try await client.createAccount("acme", admin: admin).apiKey
            _ = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"t"}"#, token: key)

            let refused: [(uri: String, token: String, code: String, message: String)] = [
                ("/v1/bindings?identiy=bob", key, "unknown_parameter", "The query parameter 'identiy' is not part of this request"),
                ("/v1/accounts?page=2&sort=name", admin, "unknown_parameter", "The query parameters 'page', 'sort' are not part of this request"),
                ("/v1/bindings?limit=1&limit=2", key, "invalid_parameter", "The query parameter 'limit' is invalid: it is given more than once"),
            ]
            for (uri, token, code, message) in refused {
                let answer = try await client.send(.get, uri, token: token)
                #expect(answer.status == .unprocessableContent, "\(uri)")
                #expect(answer.errorCode == code, "\(uri)")
                #expect(String(buffer: answer.body).contains(message), "\(uri): \(String(buffer: answer.body))")
            }
            // A deletion with a misspelt filter deletes nothing.
            let delete = try await client.send(.delete, "/v1/bindings?identity=bob&type=fcm", token: key)
            #expect(delete.errorCode == "unknown_parameter")
            #expect(try await client.send(.get, "/v1/bindings", token: key).decode(BindingList.self).data.count == 1)

            // Every documented parameter still works, and the ops endpoints take any query.
            let since = "2026-01-01T00:00:00Z"
            for uri in [
                "/v1/bindings?identity=bob&type=fcm&status=active&limit=5", "/v1/bindings?&limit=5&&",
                "/v1/calls?identity=bob&direction=incoming&state=missed,ended&since=\(since)&until=2100-01-01T00:00:00Z&limit=2",
                "/healthz?probe=1", "/readyz?nocache=1", "/?utm_source=x",
            ] {
                let answer = try await client.send(.get, uri, token: uri.hasPrefix("/v1") ? key : nil)
                #expect(answer.status == .ok, "\(uri): \(String(buffer: answer.body))")
            }
            #expect(try await client.send(.delete, "/v1/bindings?identity=bob", token: key).status == .ok)
        }
    }

    /// Names the client made up come back in error messages cut to 64 bytes between characters,
    /// however long they are or however many marks one character carries, and a query of many
    /// unknown names is not echoed whole.
    @Test func errorMessagesEchoAtMost64BytesOfClientText() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            // One character of 10 KB: an "e" and 5,000 combining acute accents.
            let accented = "e" + String(repeating: "\u{301}", count: 5_000)
            let long = String(repeating: "j", count: 15_000)
            for name in [accented, long] {
                let field = try await client.send(.post, "/v1/bindings", token: key, json: #"{"identity":"bob","type":"fcm","token":"t","\#(name)":1}"#)
                #expect(field.errorCode == "unknown_field")
                let twice = try await client.send(.post, "/v1/bindings", token: key, json: #"{"\#(name)":1,"\#(name)":2}"#)
                #expect(twice.errorCode == "malformed_json")
                for answer in [field, twice] {
                    #expect(answer.body.readableBytes < 400, "\(String(buffer: answer.body).prefix(200))")
                }
            }
            // A cut keeps whole characters: 60 "a" and a 3-byte character would pass 64 bytes.
            let cut = try await client.send(
                .post, "/v1/bindings", token: key, json: #"{"identity":"bob","type":"fcm","token":"t","\#(String(repeating: "a", count: 63))€€":1}"#)
            #expect(String(buffer: cut.body).contains("'\(String(repeating: "a", count: 63))…'"), "\(String(buffer: cut.body))")

            let names = (0..<2_000).map { "p\($0)=1" }.joined(separator: "&")
            let query = try await client.send(.get, "/v1/bindings?\(names)&\(long)=1", token: key)
            #expect(query.errorCode == "unknown_parameter")
            #expect(query.body.readableBytes < 600, "\(String(buffer: query.body).prefix(300))")
            #expect(String(buffer: query.body).contains("and 1996 more"), "\(String(buffer: query.body))")
        }
    }

    /// Ids from a path and identities from a body come back cut to 64 bytes too, over a real
    /// socket: a 404 for a 20 KB id was 20 KB (issue 42), and an identity of 256 bytes (the most
    /// one may have) was echoed whole in several messages.
    @Test func idsAndIdentitiesComeBackCutTo64Bytes() async throws {
        let server = try await TestServer.make()
        try await server.withClient(.live) { client in
            let account = try await client.createAccount("acme", admin: server.adminToken)
            let key = account.apiKey
            let id = "bnd_" + String(repeating: "x", count: 20_000)
            let echoed = "'" + String(id.prefix(64)) + "…'"
            let paths: [(HTTPRequest.Method, String, String, String)] = [
                (.get, "/v1/bindings/\(id)", key, "binding_not_found"),
                (.delete, "/v1/bindings/\(id)", key, "binding_not_found"),
                (.get, "/v1/calls/\(id)", key, "call_not_found"),
                (.post, "/v1/calls/\(id)/accept", key, "call_not_found"),
                (.delete, "/v1/accounts/\(id)", server.adminToken, "account_not_found"),
                (.delete, "/v1/accounts/\(account.id)/keys/\(id)", server.adminToken, "key_not_found"),
            ]
            for (method, path, token, code) in paths {
                let answer = try await client.send(method, path, token: token)
                let what = "\(method) \(path.prefix(40))"
                #expect(answer.status == .notFound && answer.errorCode == code, "\(what): \(String(buffer: answer.body).prefix(300))")
                #expect(answer.body.readableBytes < 300, "\(what): \(answer.body.readableBytes) bytes")
                #expect(String(buffer: answer.body).contains(echoed), "\(String(buffer: answer.body))")
            }

            // 256 bytes, the longest identity: 128 two-byte characters, cut after 32 of them.
            let identity = String(repeating: "ü", count: 128)
            let cut = "'" + String(repeating: "ü", count: 32) + "…'"
            let unreachable = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"\#(identity)"}"#)
            let twice = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":["\#(identity)","\#(identity)"]}"#)
            let encoded = identity.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            let keys = try await client.send(.get, "/v1/identities/\(encoded)/keys", token: key)
            let device = try await client.accessToken(identity: "carol", deviceID: identity, key: key)
            let otherDevice = try await client.send(
                .post, "/v1/bindings", token: device, json: #"{"type":"fcm","token":"t1","deviceId":"someone-else"}"#)
            for (answer, code) in [
                (unreachable, "no_reachable_device"), (twice, "invalid_field"), (keys, "identity_not_found"), (otherDevice, "forbidden"),
            ] {
                let text = String(buffer: answer.body)
                #expect(answer.errorCode == code, "\(text)")
                #expect(text.contains(cut), "\(text)")
                #expect(!text.contains(String(repeating: "ü", count: 33)), "\(text)")
            }

            // A value of 5,000 digits is refused without being quoted.
            let digits = String(repeating: "9", count: 5_000)
            let number = try await client.send(
                .post, "/v1/access-tokens", token: key, json: #"{"identity":"bob","deviceId":"b1","ttlSeconds":\#(digits)}"#)
            #expect(number.status == .badRequest && number.errorCode == "malformed_json", "\(String(buffer: number.body).prefix(300))")
            #expect(number.body.readableBytes < 400, "\(String(buffer: number.body).prefix(300))")
        }
    }

    private static func accountID(_ client: any TestClientProtocol, admin: String) async throws -> String {
        try await client.send(.get, "/v1/accounts", token: admin).decode(AccountList.self).data[0].id
    }
}
