import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayServer

/// Every status the server answers is one docs/openapi.yaml lists for the operation.
///
/// Each documented operation gets the same battery of requests a client can send: its valid
/// request, no credentials, an unknown token, each kind of credential it does not accept, bodies
/// that are malformed, empty, carry an unknown field, are of the wrong JSON type, are not sent as
/// JSON or are over the route's limit, and unknown and malformed path ids. Every answer must be a
/// status under the operation's `responses:`, never a 5xx, and an error's `code` must be one the
/// document names for that status (when it names any).
@Suite struct OpenAPIStatusTests {
    @Test func everyAnswerIsADocumentedStatus() async throws {
        let documented = try DocumentedOperation.all()
        #expect(Set(documented.keys) == (try OpenAPITests.documentedOperations()), "the two readings of the document disagree")
        for operation in documented.values {
            #expect(operation.duplicateStatuses.isEmpty, "\(operation.key) lists \(operation.duplicateStatuses) twice; YAML keeps only the last")
            let unknown = operation.security.filter { Scheme(rawValue: $0) == nil }
            #expect(unknown.isEmpty, "\(operation.key) names security schemes the probes do not know: \(unknown)")
        }
        let server = try await TestServer.make()
        try await server.withClient { client in
            let world = try await World.make(client, server: server)
            let fixtures = Self.fixtures(world, server: server)
            for operation in Self.runOrder(documented.values) {
                let fixture = fixtures[operation.key] ?? Fixture()
                for probe in Self.battery(for: operation, fixture) {
                    let response = try await Self.send(probe, to: operation, fixture, world: world, client: client)
                    Self.check(response, of: probe, against: operation)
                }
            }
        }
    }

    /// The query parameters the server takes are the ones the document lists, operation by
    /// operation (`access_token` everywhere; the routes it does not check aside).
    @Test func acceptedQueryParametersAreTheDocumentedOnes() throws {
        let documented = try DocumentedOperation.all()
        #expect(documented.values.contains { !$0.queryParameters.isEmpty }, "the reading of parameters found none")
        for operation in documented.values {
            let route = String(operation.key.split(separator: " ", maxSplits: 1)[1])
            guard !QueryParameter.unchecked.contains(route) else { continue }
            let accepted = QueryParameter.accepted[operation.key, default: []]
            #expect(operation.queryParameters.subtracting(QueryParameter.everywhere) == accepted, "\(operation.key)")
        }
        #expect(Set(QueryParameter.accepted.keys).isSubset(of: Set(documented.keys)))
        let routes = Set(documented.keys.map { String($0.split(separator: " ", maxSplits: 1)[1]) })
        #expect(QueryParameter.unchecked.isSubset(of: routes), "unchecked routes that do not exist: \(QueryParameter.unchecked.subtracting(routes))")
    }

    /// Checks one answer against the document.
    static func check(_ response: TestResponse, of probe: Probe, against operation: DocumentedOperation) {
        let status = response.status.code
        let answer = "\(status)" + (response.errorCode.map { " \($0)" } ?? "")
        let which = "\(operation.key), probe '\(probe.name)'"
        #expect(status < 500, "\(which): answered \(answer)")
        if let expected = probe.expect {
            #expect(response.status == expected, "\(which): answered \(answer), expected \(expected.code); the probes' setup is off")
        }
        guard let codes = operation.responses["\(status)"] else {
            Issue.record("\(which): answered \(answer), which is not among its documented statuses \(operation.responses.keys.sorted())")
            return
        }
        if let code = response.errorCode, !codes.isEmpty {
            #expect(codes.contains(code), "\(which): answered \(answer); the document names only \(codes.sorted()) for \(status)")
        }
    }

    // MARK: The battery

    /// The battery for one operation: the valid request first (with each accepted credential), so
    /// it meets the resources as set up; then the rest, whose answers need only be documented.
    static func battery(for operation: DocumentedOperation, _ fixture: Fixture) -> [Probe] {
        let accepted = operation.security.compactMap(Scheme.init(rawValue:))
        let right = accepted.first.map(Credential.token) ?? .none
        var probes: [Probe] =
            accepted.isEmpty
            ? [Probe("valid request", .none, expect: fixture.expect)]
            : accepted.enumerated().map { index, scheme in
                Probe("valid request (\(scheme.rawValue))", .token(scheme), expect: index == 0 ? fixture.expect : nil)
            }
        probes += [Probe("no credentials", .none), Probe("unknown bearer token", .unknown)]
        probes += Scheme.allCases.filter { !accepted.contains($0) }.map { Probe("\($0.rawValue) (not accepted here)", .token($0)) }
        if fixture.sign != nil { probes.append(Probe("unsigned", right, signed: false)) }
        probes += [
            Probe("unknown query parameter", right, query: "?probeUnknownParameter=1"),
            Probe("malformed JSON", right, body: .text("{")),
            Probe("JSON with a trailing comma", right, body: .text(#"{"probeField":1,}"#)),
            Probe("JSON naming a member twice", right, body: .text(#"{"probeField":1,"probeField":2}"#)),
            Probe("empty body", right, body: .text("")),
            Probe("unknown field", right, body: .withUnknownField),
            Probe("JSON array body", right, body: .text("[]")),
            Probe("text/plain body", right, contentType: "text/plain"),
            Probe("body over the limit", right, body: .overLimit),
        ]
        if operation.key.contains("{") {
            probes += [Probe("unknown id", right, ids: .unknown), Probe("malformed id", right, ids: .malformed)]
        }
        return probes + fixture.extra
    }

    /// Sends one probe: the one place requests are built.
    static func send(
        _ probe: Probe, to operation: DocumentedOperation, _ fixture: Fixture, world: World, client: any TestClientProtocol
    ) async throws -> TestResponse {
        let parts = operation.key.split(separator: " ", maxSplits: 1).map(String.init)
        let method = try #require(HTTPRequest.Method(parts[0]))
        var segments: [String] = []
        for segment in parts[1].split(separator: "/", omittingEmptySubsequences: false) {
            guard segment.hasPrefix("{"), segment.hasSuffix("}") else {
                segments.append(String(segment))
                continue
            }
            let name = String(segment.dropFirst().dropLast())
            let existing = try #require(fixture.ids[name] ?? world.ids[name], "\(operation.key): no id for {\(name)}")
            switch probe.ids {
            case .existing: segments.append(existing)
            // Same prefix, a body no resource has.
            case .unknown: segments.append(existing.prefix { $0 != "_" } + "_" + String(repeating: "0", count: 26))
            case .malformed: segments.append("not-an-id")
            }
        }
        var uri = segments.joined(separator: "/") + (probe.query ?? fixture.query)

        let body: [UInt8]?
        switch probe.body {
        case .valid: body = fixture.body.map { Array($0.utf8) }
        case .text(let text): body = Array(text.utf8)
        case .withUnknownField:
            let valid = fixture.body ?? "{}"
            body = Array((valid == "{}" ? #"{"probeUnknownField":1}"# : #"{"probeUnknownField":1,"# + valid.dropFirst()).utf8)
        case .overLimit:
            body = Array(#"{"probeFiller":""#.utf8) + Array(repeating: UInt8(ascii: "x"), count: fixture.bodyLimit) + Array(#""}"#.utf8)
        }

        var headers = probe.headers
        switch probe.credential {
        case .none: break
        case .unknown: headers[.authorization] = "Bearer not-a-token-this-server-issued"
        case .token(let scheme): headers[.authorization] = "Bearer \(try #require(world.tokens[scheme]))"
        }
        if body != nil, let contentType = probe.contentType { headers[.contentType] = contentType }
        if probe.signed, let sign = fixture.sign {
            let signed = sign(uri, body ?? [])
            uri = signed.uri
            headers.append(contentsOf: signed.headers)
        }
        return try await client.execute(uri: uri, method: method, headers: headers, body: body.map { ByteBuffer(bytes: $0) })
    }

    /// Operations in the order they are probed: those that delete come last, as they take away
    /// what the others use.
    static func runOrder(_ operations: some Sequence<DocumentedOperation>) -> [DocumentedOperation] {
        func rank(_ operation: DocumentedOperation) -> Int { operation.key.hasPrefix("DELETE ") ? 1 : 0 }
        return operations.sorted { (rank($0), $0.key) < (rank($1), $1.key) }
    }

    /// What each operation's valid request is, where the battery's defaults do not do. Nothing here
    /// may make the server reach the internet: FCM is never configured (test pushes and rings fail
    /// with `fcm_not_configured` at once) and every binding is an FCM one.
    static func fixtures(_ world: World, server: TestServer) -> [String: Fixture] {
        let maxBody = server.configuration.maxBodyBytes
        let twilio = #"{"accountSid":"\#(WebhookTests.twilioSID)","authToken":"\#(WebhookTests.twilioToken)"}"#
        let webex = #"{"secret":"\#(WebhookTests.webexSecret)"}"#
        let apns = #"{"teamId":"ABCDE12345","keyId":"KEY1234567","privateKey":"\#(world.p8)","topic":"com.example.app"}"#
        var fixtures: [String: Fixture] = [
            "GET /": Fixture(expect: .ok),
            "GET /healthz": Fixture(expect: .ok),
            "GET /readyz": Fixture(expect: .ok),
            "GET /metrics": Fixture(expect: .ok),
            "GET /openapi.yaml": Fixture(expect: .ok),
            "POST /v1/accounts": Fixture(body: #"{"name":"probe-account"}"#, expect: .created),
            "GET /v1/accounts": Fixture(expect: .ok),
            // An account of its own: the probes' account must outlive it.
            "DELETE /v1/accounts/{accountId}": Fixture(ids: ["accountId": world.spareAccount], expect: .noContent),
            "POST /v1/accounts/{accountId}/keys": Fixture(expect: .created),
            "DELETE /v1/accounts/{accountId}/keys/{keyId}": Fixture(expect: .noContent),
            "GET /v1/credentials": Fixture(expect: .ok),
            "PUT /v1/credentials/apns": Fixture(body: apns, expect: .ok),
            "DELETE /v1/credentials/apns": Fixture(expect: .noContent),
            // Left incomplete on purpose: valid FCM credentials would send pushes to Google.
            "PUT /v1/credentials/fcm": Fixture(body: #"{"serviceAccount":{"type":"service_account"}}"#, expect: .unprocessableContent),
            "DELETE /v1/credentials/fcm": Fixture(expect: .notFound),
            "PUT /v1/credentials/twilio": Fixture(body: twilio, expect: .ok),
            "DELETE /v1/credentials/twilio": Fixture(expect: .noContent),
            "PUT /v1/credentials/webex": Fixture(body: webex, expect: .ok),
            "DELETE /v1/credentials/webex": Fixture(expect: .noContent),
            "POST /v1/access-tokens": Fixture(body: #"{"identity":"alice","deviceId":"alice-tablet"}"#, expect: .created),
            "POST /v1/bindings": Fixture(body: #"{"identity":"alice","type":"fcm","token":"alice-second-token"}"#, expect: .created),
            "GET /v1/bindings": Fixture(
                expect: .ok,
                extra: [
                    Probe("limit out of range", .token(.apiKey), query: "?limit=0"),
                    Probe("cursor not issued here", .token(.apiKey), query: "?cursor=bogus"),
                    Probe("another identity's bindings", .token(.accessToken), query: "?identity=bob"),
                ]),
            "DELETE /v1/bindings": Fixture(
                query: "?identity=carol", expect: .ok, extra: [Probe("identity missing", .token(.apiKey), query: "")]),
            "POST /v1/bindings/batch": Fixture(
                body: #"{"upsert":[{"identity":"dave","type":"fcm","token":"dave-token"}],"delete":["bnd_00000000000000000000000000"]}"#,
                bodyLimit: BindingsController.maxBatchBodyBytes, expect: .ok),
            "GET /v1/bindings/{bindingId}": Fixture(expect: .ok),
            "DELETE /v1/bindings/{bindingId}": Fixture(expect: .noContent),
            // FCM is not configured: 409 fcm_not_configured, before anything is sent.
            "POST /v1/bindings/{bindingId}/test": Fixture(expect: .conflict),
            // Rings an identity without devices: 404 no_reachable_device, nothing is pushed.
            "POST /v1/webhooks/twilio/{accountId}": Fixture(
                body:
                    #"{"twi_account_sid":"\#(WebhookTests.twilioSID)","twi_message_id":"probe-1","twi_message_type":"twilio.voice.call","twi_to":"client:nobody"}"#,
                expect: .notFound,
                sign: { uri, body in
                    let signed = uri + (uri.contains("?") ? "&" : "?") + "bodySHA256=\(WebhookTests.sha256(body))"
                    return (signed, [.twilioSignature: WebhookTests.twilioSignature(url: "http://\(WebhookTests.host)\(signed)")])
                }),
            "POST /v1/webhooks/webex/{accountId}": Fixture(
                body: #"{"resource":"telephony_push","event":"updated","actorId":"nobody","data":{"apnsPayload":{"aps":{}}}}"#,
                expect: .notFound,
                sign: { uri, body in
                    let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Data(WebhookTests.webexSecret.utf8)))
                    return (uri, [.sparkSignature: mac.map { String(format: "%02x", $0) }.joined()])
                }),
            "POST /v1/calls": Fixture(
                body: #"{"from":"alice","to":"bob"}"#, bodyLimit: CallsController.maxStartBodyBytes(general: maxBody), expect: .created,
                extra: [Probe("callee without devices", .token(.apiKey), body: .text(#"{"from":"alice","to":"nobody"}"#))]),
            "GET /v1/calls": Fixture(
                expect: .ok,
                extra: [
                    Probe("limit out of range", .token(.apiKey), query: "?limit=101", expect: .unprocessableContent),
                    Probe("cursor not issued here", .token(.apiKey), query: "?cursor=bogus", expect: .unprocessableContent),
                    Probe("unknown state", .token(.apiKey), query: "?state=done", expect: .unprocessableContent),
                    Probe("since not a time", .token(.apiKey), query: "?since=yesterday", expect: .unprocessableContent),
                    Probe("direction without identity", .token(.apiKey), query: "?direction=incoming", expect: .unprocessableContent),
                    Probe("another identity's calls", .token(.accessToken), query: "?identity=bob", expect: .forbidden),
                    Probe(
                        "every filter", .token(.accessToken),
                        query: "?direction=outgoing&state=ringing,accepted&since=2020-01-01T00:00:00Z&until=2099-01-01T00:00:00Z&limit=100",
                        expect: .ok),
                ]),
            "GET /v1/calls/{callId}": Fixture(expect: .ok),
            "GET /v1/settings/calls": Fixture(expect: .ok),
            "GET /v1/identities/{identity}/keys": Fixture(ids: ["identity": "bob"], expect: .ok),
            "PATCH /v1/settings/calls": Fixture(
                body: #"{"ifBusy":"ring"}"#, expect: .ok,
                extra: [Probe("unknown policy", .token(.apiKey), body: .text(#"{"ifBusy":"sometimes"}"#), expect: .unprocessableContent)]),
            // Router tests cannot upgrade: the valid request is refused as a plain GET (websocket_required).
            "GET /v1/connect": Fixture(
                expect: .badRequest,
                extra: [
                    Probe(
                        "WebSocket upgrade with a bad lastEventId", .token(.accessToken), query: "?lastEventId=nope",
                        headers: [.upgrade: "websocket", .connection: "Upgrade"]),
                    Probe("API key as ?access_token=", .none, query: "?access_token=\(world.tokens[.apiKey] ?? "")"),
                ]),
        ]
        // Each command has a call of its own, in the state the command needs; the account key acts
        // for a device of the right side.
        for (command, device) in [("accept", "bob-phone"), ("reject", "bob-phone"), ("cancel", "alice-phone"), ("end", "bob-phone")] {
            fixtures["POST /v1/calls/{callId}/\(command)"] = Fixture(
                body: #"{"deviceId":"\#(device)"}"#, ids: ["callId": world.calls[command] ?? ""],
                bodyLimit: CallsController.maxCommandBodyBytes, expect: .ok)
        }
        return fixtures.mapValues { fixture in
            var fixture = fixture
            if fixture.bodyLimit == 0 { fixture.bodyLimit = maxBody }
            return fixture
        }
    }
}

// MARK: - Probes

extension OpenAPIStatusTests {
    /// A document security scheme, which names a kind of credential.
    enum Scheme: String, CaseIterable, Sendable {
        case adminToken, apiKey, accessToken
    }

    /// The credential a probe sends.
    enum Credential: Sendable {
        /// No `Authorization` header.
        case none
        /// A bearer token that is no kind of credential.
        case unknown
        /// A valid credential of the scheme's kind.
        case token(Scheme)
    }

    /// One request of the battery.
    struct Probe: Sendable {
        /// What failure messages call it.
        var name: String
        var credential: Credential
        var body: Body
        /// Sent with any body; nil sends none.
        var contentType: String?
        var ids: IDs
        /// Whether a webhook probe carries the provider's signature.
        var signed: Bool
        /// Replaces the fixture's query (with its `?`).
        var query: String?
        var headers: HTTPFields
        /// The status the probe must get, for the valid requests: it shows the setup works.
        var expect: HTTPResponse.Status?

        /// What the probe sends as its body.
        enum Body: Sendable {
            /// The operation's valid body (none when it takes none).
            case valid
            case text(String)
            /// The valid body with one more field.
            case withUnknownField
            /// A JSON object just over the route's limit.
            case overLimit
        }

        /// Which ids fill the path.
        enum IDs: Sendable {
            /// Resources that exist.
            case existing
            /// Well-formed ids nothing has.
            case unknown
            /// Not ids at all.
            case malformed
        }

        init(
            _ name: String, _ credential: Credential, body: Body = .valid, contentType: String? = "application/json", ids: IDs = .existing,
            signed: Bool = true, query: String? = nil, headers: HTTPFields = [:], expect: HTTPResponse.Status? = nil
        ) {
            self.name = name
            self.credential = credential
            self.body = body
            self.contentType = contentType
            self.ids = ids
            self.signed = signed
            self.query = query
            self.headers = headers
            self.expect = expect
        }
    }

    /// What one operation's probes need beyond the battery.
    struct Fixture: Sendable {
        /// The valid request's body; nil for none.
        var body: String? = nil
        /// Appended to every probe's path, unless the probe has its own.
        var query = ""
        /// Path ids for this operation, over the world's.
        var ids: [String: String] = [:]
        /// The route's body limit; 0 means the server's general one.
        var bodyLimit = 0
        /// What the first valid request must answer.
        var expect: HTTPResponse.Status? = nil
        /// Signs a webhook: from the path and body, the path to send and the signature header.
        var sign: (@Sendable (_ uri: String, _ body: [UInt8]) -> (uri: String, headers: HTTPFields))? = nil
        /// Probes only this operation gets.
        var extra: [Probe] = []
    }

    /// The resources the probes use: one account with an extra key, a device token for alice, FCM
    /// bindings for alice, bob and carol, Twilio and Webex credentials, and a call for each command;
    /// and a spare account to delete.
    struct World: Sendable {
        /// A credential of each kind.
        var tokens: [Scheme: String]
        /// Path parameter name → an existing resource.
        var ids: [String: String]
        /// Command → a call in the state it needs.
        var calls: [String: String]
        /// An APNs signing key, for the valid credentials upload.
        var p8: String
        /// An account nothing else uses.
        var spareAccount: String

        /// Creates the resources through the API.
        static func make(_ client: any TestClientProtocol, server: TestServer) async throws -> World {
            let admin = server.adminToken
            let account = try await client.createAccount("acme", admin: admin)
            let key = account.apiKey
            let spare = try await client.createAccount("spare", admin: admin)
            let secondKey = try await client.send(.post, "/v1/accounts/\(account.id)/keys", token: admin).decode(CreatedKey.self)
            let device = try await client.accessToken(identity: "alice", deviceID: "alice-phone", key: key)
            let binding = try await client.createBinding(#"{"identity":"alice","type":"fcm","token":"alice-token"}"#, token: key)
            for identity in ["bob", "carol"] {
                _ = try await client.createBinding(#"{"identity":"\#(identity)","type":"fcm","token":"\#(identity)-token"}"#, token: key)
            }
            _ = try await WebhookTests.configureProviders(client, key: key, admin: admin)
            var calls: [String: String] = [:]
            for command in ["accept", "reject", "cancel", "end"] {
                let response = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#)
                #expect(response.status == .created, "\(String(buffer: response.body))")
                calls[command] = try response.decode(CallResource.self).id
            }
            let accepted = try await client.send(.post, "/v1/calls/\(calls["end"] ?? "")/accept", token: key, json: #"{"deviceId":"bob-phone"}"#)
            #expect(accepted.status == .ok, "\(String(buffer: accepted.body))")
            // The PEM's newlines as JSON escapes, for the body text.
            let p8 = TestCredentials.apnsP8().replacingOccurrences(of: "\n", with: "\\n")
            return World(
                tokens: [.adminToken: admin, .apiKey: key, .accessToken: device],
                ids: ["accountId": account.id, "keyId": secondKey.id, "bindingId": binding.id, "callId": calls["accept"] ?? ""],
                calls: calls, p8: p8, spareAccount: spare.id)
        }
    }
}

// MARK: - The document

/// What docs/openapi.yaml says one operation answers, read line by line as
/// ``OpenAPITests/documentedOperations()`` reads the operations (the document's layout is fixed:
/// two spaces per level).
struct DocumentedOperation: Sendable {
    /// `METHOD /path/{param}`.
    var key: String
    /// The security schemes the operation accepts, any one of them; empty for `security: []`.
    var security: [String] = []
    /// Each documented status with the error codes its response names: `code:` values of its
    /// examples and snake_case words in backticks in its text. Empty when it names none.
    var responses: [String: Set<String>] = [:]
    /// Status keys listed more than once.
    var duplicateStatuses: [String] = []
    /// The names of its query parameters.
    var queryParameters: Set<String> = []

    /// Every operation of the checked-in document, by key.
    static func all() throws -> [String: DocumentedOperation] {
        let text = try String(contentsOf: OpenAPITests.repositoryRoot.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
        return parse(text)
    }

    /// Reads the operations of `paths:` (their security, their status keys and what each status
    /// says) and the response components they refer to.
    static func parse(_ text: String) -> [String: DocumentedOperation] {
        let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options"]
        var operations: [String: DocumentedOperation] = [:]
        // Each response component's text, and each status's: its `$ref` target or its own text.
        var components: [String: String] = [:]
        var statusRefs: [String: [String: String]] = [:]
        var statusTexts: [String: [String: String]] = [:]
        // Each parameter component's name and place (`in`), each operation's `$ref`s to them, and
        // the name of the inline parameter being read.
        var parameterComponents: [String: (name: String, place: String)] = [:]
        var parameterRefs: [String: [String]] = [:]
        var inlineParameter: String?

        var section = ""
        var subsection = ""
        var path = ""
        var operation: String?
        var field = ""
        var status: String?
        var component: String?
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let content = raw.drop { $0 == " " }
            guard !content.isEmpty else { continue }
            let indent = raw.count - content.count
            let key = String(content.prefix { $0 != ":" }).trimmingCharacters(in: CharacterSet(charactersIn: "'\""))
            if indent == 0 {
                section = key
                continue
            }
            if section == "components" {
                if indent == 2 {
                    subsection = key
                } else if subsection == "parameters" {
                    if indent == 4 {
                        component = key
                    } else if indent == 6, let component, key == "name" || key == "in" {
                        let value = String(content.dropFirst(key.count + 1)).trimmingCharacters(in: .whitespaces)
                        var entry = parameterComponents[component] ?? ("", "")
                        if key == "name" { entry.name = value } else { entry.place = value }
                        parameterComponents[component] = entry
                    }
                } else if subsection == "responses" {
                    if indent == 4 {
                        component = key
                    } else if let component {
                        components[component, default: ""] += content + "\n"
                    }
                }
                continue
            }
            guard section == "paths" else { continue }
            switch indent {
            case 2:
                path = key
                operation = nil
            case 4:
                operation = methods.contains(key) ? "\(key.uppercased()) \(path)" : nil
                if let operation { operations[operation] = DocumentedOperation(key: operation) }
            case 6:
                field = key
                status = nil
            default:
                guard let operation else { continue }
                if field == "parameters" {
                    let line = content.trimmingCharacters(in: .whitespaces)
                    if line.hasPrefix("- $ref: '#/components/parameters/") {
                        parameterRefs[operation, default: []].append(String(line.dropFirst("- $ref: '#/components/parameters/".count).dropLast()))
                    } else if line.hasPrefix("- name: ") {
                        inlineParameter = String(line.dropFirst("- name: ".count))
                    } else if line.hasPrefix("in: "), let name = inlineParameter {
                        if line == "in: query" { operations[operation]?.queryParameters.insert(name) }
                        inlineParameter = nil
                    }
                } else if field == "security", indent == 8, content.hasPrefix("- ") {
                    operations[operation]?.security.append(String(key.dropFirst(2)))
                } else if field == "responses", indent == 8 {
                    if operations[operation]?.responses[key] != nil { operations[operation]?.duplicateStatuses.append(key) }
                    operations[operation]?.responses[key] = []
                    status = key
                } else if field == "responses", let status {
                    let line = content.trimmingCharacters(in: .whitespaces)
                    if line.hasPrefix("$ref: '#/components/responses/") {
                        statusRefs[operation, default: [:]][status] = String(line.dropFirst("$ref: '#/components/responses/".count).dropLast())
                    } else {
                        statusTexts[operation, default: [:]][status, default: ""] += content + "\n"
                    }
                }
            }
        }
        for (key, references) in parameterRefs {
            for reference in references {
                if let component = parameterComponents[reference], component.place == "query" {
                    operations[key]?.queryParameters.insert(component.name)
                }
            }
        }
        for (key, operation) in operations {
            for status in operation.responses.keys {
                let text = statusRefs[key]?[status].map { components[$0] ?? "" } ?? statusTexts[key]?[status] ?? ""
                operations[key]?.responses[status] = errorCodes(in: text)
            }
        }
        return operations
    }

    /// The error codes a response's text names.
    static func errorCodes(in text: String) -> Set<String> {
        let isCode = { (word: Substring) in
            word.first?.isLetter == true && word.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        }
        var codes = Set<String>()
        for line in text.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            if trimmed.hasPrefix("code: ") { codes.insert(String(trimmed.dropFirst("code: ".count))) }
        }
        for (index, word) in text.split(separator: "`", omittingEmptySubsequences: false).enumerated() where index % 2 == 1 && isCode(word) {
            codes.insert(String(word))
        }
        return codes
    }
}
