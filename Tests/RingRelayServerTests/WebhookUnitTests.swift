import Foundation
import RingRelayCore
import RingRelayTesting
import Testing

@testable import RingRelayServer

/// Copies of the reference fixtures, bundled with the tests (see Fixtures/README.md).
enum Fixtures {
    static let root = Bundle.module.resourceURL!.appendingPathComponent("Fixtures")

    static func json(_ path: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent(path))) as? [String: Any] ?? [:]
    }

    static func bytes(_ path: String) throws -> [UInt8] {
        Array(try Data(contentsOf: root.appendingPathComponent(path)))
    }
}

@Suite struct TwilioSignatureTests {
    @Test func formVectorsFromTwiliosOwnTests() throws {
        let vectors = try Fixtures.json("twilio/request-validator-vectors.json")
        let token = try #require(vectors["auth_token"] as? String)
        let form = try #require(vectors["form"] as? [String: Any])
        let params = try #require(form["params"] as? [String: String])
        let body = Array(params.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&").utf8)
        let url = try #require(form["url"] as? String)
        let signature = try #require(form["expected_signature"] as? String)
        #expect(TwilioSignature.isValid(signature: signature, url: url, body: body, form: TwilioSignature.formFields(body), authToken: token))
        // Twilio may have signed the URL with the default port: accepted too.
        let withPort = try #require(form["expected_signature_url_with_port_443"] as? String)
        #expect(TwilioSignature.isValid(signature: withPort, url: url, body: body, form: TwilioSignature.formFields(body), authToken: token))
        let http = try #require(form["http_variant"] as? [String: String])
        #expect(TwilioSignature.isValid(signature: http["expected_signature_url_with_port_80"]!, url: http["url"]!, body: body, form: TwilioSignature.formFields(body), authToken: token))
        let custom = try #require(form["http_port_1234_variant"] as? [String: String])
        #expect(TwilioSignature.isValid(signature: custom["expected_signature"]!, url: custom["url"]!, body: body, form: TwilioSignature.formFields(body), authToken: token))
        #expect(!TwilioSignature.isValid(signature: signature, url: url, body: body, form: TwilioSignature.formFields(body), authToken: "54321"))
        #expect(!TwilioSignature.isValid(signature: signature, url: url + "&x=1", body: body, form: TwilioSignature.formFields(body), authToken: token))
    }

    @Test func duplicateParametersAreSortedAndDeduplicated() throws {
        let vectors = try Fixtures.json("twilio/request-validator-vectors.json")
        let duplicates = try #require(vectors["form_duplicates"] as? [String: Any])
        let pairs = try #require(duplicates["params_multidict"] as? [[String]])
        let body = Array(pairs.map { "\($0[0])=\($0[1])" }.joined(separator: "&").utf8)
        #expect(
            TwilioSignature.isValid(
                signature: duplicates["expected_signature"] as! String, url: duplicates["url"] as! String, body: body, form: TwilioSignature.formFields(body),
                authToken: "12345"))
    }

    @Test func jsonBodyIsCoveredByBodySHA256() throws {
        let vectors = try Fixtures.json("twilio/request-validator-vectors.json")
        let json = try #require(vectors["json_body"] as? [String: String])
        let body = Array(json["body"]!.utf8)
        #expect(TwilioSignature.sha256Hex(body) == json["body_sha256_hex"])
        #expect(TwilioSignature.isValid(signature: json["expected_signature"]!, url: json["url"]!, body: body, form: nil, authToken: "12345"))
        // A changed body no longer matches its hash.
        #expect(!TwilioSignature.isValid(signature: json["expected_signature"]!, url: json["url"]!, body: body + [0x20], form: nil, authToken: "12345"))
        // Signing the URL without its bodySHA256 adds it back, as Twilio does.
        let unsigned = json["url"]!.replacingOccurrences(of: "&bodySHA256=" + json["body_sha256_hex"]!, with: "")
        #expect(TwilioSignature.signingJSON(body, url: unsigned, authToken: "12345") == (json["url"]!, json["expected_signature"]!))
        // Without bodySHA256 a JSON body cannot be verified.
        #expect(!TwilioSignature.isValid(signature: json["expected_signature"]!, url: "https://mycompany.com/myapp.php?foo=1&bar=2", body: body, form: nil, authToken: "12345"))
    }

    /// `bodySHA256` is read from the query as Twilio's own validator reads it (Python's
    /// `parse_qs`): `+` is a space, `%XX` a byte, the first of repeated names, nothing after `#`.
    @Test func theBodyHashIsReadFromTheQueryAsTwiliosValidatorReadsIt() {
        #expect(TwilioSignature.queryValue("bodySHA256", in: "https://h.example/p?a=1&bodySHA256=ab12") == "ab12")
        #expect(TwilioSignature.queryValue("bodySHA256", in: "https://h.example/p?bodySHA256=AB%31%32&x") == "AB12")
        #expect(TwilioSignature.queryValue("b", in: "https://h.example/p?b=x+y&b=z") == "x y")
        #expect(TwilioSignature.queryValue("bodySHA256", in: "https://h.example/p?x=1") == nil)
        #expect(TwilioSignature.queryValue("bodySHA256", in: "https://h.example/bodySHA256=ab") == nil)
        #expect(TwilioSignature.queryValue("bodySHA256", in: "https://h.example/p?a=1#bodySHA256=ab") == nil)
        #expect(TwilioSignature.queryValue("bodySHA2", in: "https://h.example/p?bodySHA256=ab") == nil)
    }
}

@Suite struct TwilioFormTests {
    @Test func formComponentsDecodeAsFoundationDoes() {
        for text in [
            "client%3Aalice", "a+b", "%2B1%20555", "plain", "", "%e2%82%AC+euro", "100%", "%zz", "%4", "%C3%28", "a%2", "+%2B+",
            "caf%C3%A9", "%00",
        ] {
            let foundation = text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? text
            #expect(TwilioSignature.decodeFormComponent(Array(text.utf8)[...]) == foundation, "\(text)")
        }
        let fields = TwilioSignature.formFields(Array("To=client%3Aalice&&Empty=&Flag&A=1=2".utf8))
        #expect(fields.map(\.name) == ["To", "Empty", "Flag", "A"])
        #expect(fields.map(\.value) == ["client:alice", "", "", "1=2"])
    }

    @Test func aFormBecomesTheJSONObjectFoundationWouldWrite() throws {
        let fields = [
            "twi_to": "client:alice", "twi_from": "+15551234567", "quote": #"say "hi"\now"#, "control": "tab\tbell\u{07}",
            "unicode": "café ✓", "slash": "a/b", "": "empty key",
        ]
        let written = WebhooksController.jsonObject(sortedBy: fields)
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(written)) as? [String: String])
        #expect(parsed == fields)
        let keys = fields.keys.sorted()
        let positions = try keys.map { key in try #require(String(decoding: written, as: UTF8.self).range(of: "\"\(key)\":")).lowerBound }
        #expect(positions == positions.sorted())
    }
}

@Suite struct WebexSignatureTests {
    @Test func vectorsOverTheExactBytes() throws {
        let vectors = try Fixtures.json("webex/x-spark-signature-vectors.json")
        let secret = try #require(vectors["secret"] as? String)
        let cases = try #require(vectors["cases"] as? [[String: Any]])
        #expect(cases.count == 2)
        for item in cases {
            let body = try Fixtures.bytes("webex/" + (item["body_file"] as! String))
            #expect(body.count == item["body_len"] as? Int)
            let expected = try #require(item["expected_x_spark_signature"] as? String)
            #expect(WebexSignature.signature(of: body, secret: secret) == expected)
            #expect(WebexSignature.isValid(signature: expected, body: body, secret: secret))
            #expect(WebexSignature.isValid(signature: expected.uppercased(), body: body, secret: secret))
            #expect(!WebexSignature.isValid(signature: expected, body: body, secret: secret + "x"))
        }
    }
}

@Suite struct RawJSONTests {
    @Test func valuesAreFoundAsTheirExactBytes() {
        let body = Array(#"{ "id" : "x", "data": {"fcmPayload" :{"b":1,"a":"\"q\""} , "apnsPayload":{ "k" : [1, {"z":null}] }}}"#.utf8)
        #expect(RawJSON.value(at: ["data", "apnsPayload"], in: body).map { String(decoding: $0, as: UTF8.self) } == #"{ "k" : [1, {"z":null}] }"#)
        #expect(RawJSON.value(at: ["data", "fcmPayload"], in: body).map { String(decoding: $0, as: UTF8.self) } == #"{"b":1,"a":"\"q\""}"#)
        #expect(RawJSON.value(at: ["id"], in: body).map { String(decoding: $0, as: UTF8.self) } == #""x""#)
        #expect(RawJSON.value(at: ["data", "missing"], in: body) == nil)
        #expect(RawJSON.value(at: ["data"], in: Array(#"{"d\u0061ta":true}"#.utf8)).map { String(decoding: $0, as: UTF8.self) } == "true")
        #expect(RawJSON.value(at: ["data"], in: Array("[1,2]".utf8)) == nil)
        #expect(RawJSON.value(at: ["data"], in: Array(#"{"data":"#.utf8)) == nil)
    }

    @Test func apsIsAddedOnlyWhenAbsent() {
        func add(_ text: String) -> String? { RawJSON.addingEmptyAPS(to: Array(text.utf8)[...]).map { String(decoding: $0, as: UTF8.self) } }
        #expect(add(#"{"twi_to":"client:bob"}"#) == #"{"aps":{},"twi_to":"client:bob"}"#)
        #expect(add("{}") == #"{"aps":{}}"#)
        #expect(add(" {\n} ") == " {\"aps\":{}\n} ")
        #expect(add(#"{"aps":{"alert":"x"},"a":1}"#) == #"{"aps":{"alert":"x"},"a":1}"#)
        #expect(add(#"{"nested":{"aps":1}}"#) == #"{"aps":{},"nested":{"aps":1}}"#)
        // A key spelled with escapes is still that key; a longer or shorter one is not.
        #expect(add(#"{"\u0061ps":1}"#) == #"{"\u0061ps":1}"#)
        #expect(add(#"{"ap\"s":1,"apsx":2,"ap":3}"#) == #"{"aps":{},"ap\"s":1,"apsx":2,"ap":3}"#)
        #expect(add("[]") == nil)
        #expect(add(#"{"a":"#) == nil)
        #expect(add(#"{} {}"#) == nil)
    }

    @Test func dataValuesBecomeStrings() {
        let map = RawJSON.stringMap(["s": "text", "n": 12, "b": true, "o": ["k": "v"], "z": NSNull()])
        #expect(map == ["s": "text", "n": "12", "b": "true", "o": #"{"k":"v"}"#, "z": "null"])
    }
}

@Suite struct RateLimiterTests {
    @Test func burstThenSteadyRatePerKey() {
        let clock = ManualWallClock()
        let limiter = RateLimiter(rate: 10, burst: 3, clock: clock)
        #expect((0..<3).allSatisfy { _ in limiter.acquire("a") == nil })
        let wait = limiter.acquire("a")
        #expect(wait != nil)
        #expect(wait! <= .milliseconds(100))
        #expect(limiter.acquire("b") == nil)
        clock.advance(by: 0.1)
        #expect(limiter.acquire("a") == nil)
        #expect(limiter.acquire("a") != nil)
        #expect(RateLimiter(rate: 0, burst: 1, clock: clock).acquire("a") == nil)
    }

    /// Keys come and go (accounts, calling identities): the limiter keeps at most `capacity`
    /// buckets, dropping refilled ones first, so an active key keeps its debt.
    @Test func bucketsAreBoundedAndActiveDebtIsKept() {
        let clock = ManualWallClock()
        let limiter = RateLimiter(rate: 1, burst: 2, clock: clock, capacity: 100)
        #expect(limiter.acquire("busy") == nil)
        #expect(limiter.acquire("busy") == nil)
        for index in 0..<99 { _ = limiter.acquire("passer-by-\(index)") }
        #expect(limiter.count == 100)
        // 1.5 s later the passers-by have refilled; the busy key has 1.5 of its 2 tokens back.
        clock.advance(by: 1.5)
        _ = limiter.acquire("newcomer")
        #expect(limiter.count == 2, "refilled buckets went, the busy key and the newcomer stayed")
        #expect(limiter.acquire("busy") == nil)
        #expect(limiter.acquire("busy") != nil, "the busy key kept its debt")
        // A flood of keys that never refill in time cannot grow it either.
        for index in 0..<10_000 { _ = limiter.acquire("flood-\(index)") }
        #expect(limiter.count <= 100)
    }
}
