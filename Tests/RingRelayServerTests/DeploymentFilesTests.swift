import AsyncHTTPClient
import Foundation
import HummingbirdWSClient
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

/// The deployment files (`.env.example`, `Dockerfile`, `deploy/`) against the server they deploy:
/// every setting listed with its real default, the files agreeing with each other, the systemd
/// unit accepted by systemd, and the nginx configuration carrying TLS, webhooks and live
/// connections to a real server.
@Suite struct DeploymentFilesTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: repository.appendingPathComponent(path), encoding: .utf8)
    }

    /// `.env.example`'s settings, commented out (`# RINGRELAY_X=value`) or not, in order.
    static func exampleSettings() throws -> [(key: String, value: String)] {
        try read(".env.example").split(separator: "\n").compactMap { line in
            guard let match = line.wholeMatch(of: /(?:# )?(RINGRELAY_[A-Z0-9_]+)=(.*)/) else { return nil }
            return (String(match.output.1), String(match.output.2))
        }
    }

    // MARK: .env.example

    @Test func envExampleListsEveryServerSettingOnce() async throws {
        let keys = try Self.exampleSettings().map(\.key)
        let expected = ServerConfiguration.Key.allCases.map(\.environmentVariable)
        for variable in expected {
            #expect(keys.contains(variable), "\(variable) has no line in .env.example")
        }
        for key in Set(keys) {
            #expect(expected.contains(key), "\(key) in .env.example is not a setting of ringrelay serve")
            #expect(keys.count { $0 == key } == 1, "\(key) appears more than once in .env.example")
        }
        // `serve --help` is what users read: every variable it names is in the file too.
        let help = try await ServerProcess.run(["serve", "--help"], directory: NSTemporaryDirectory())
        let named = help.stdout.matches(of: /\[env:\s+(RINGRELAY_[A-Z0-9_]+)\]/).map { String($0.output.1) }
        #expect(named.count >= expected.count, "serve --help: \(help.stdout)")
        for variable in named {
            #expect(keys.contains(variable), "serve --help names \(variable), which .env.example lacks")
        }
    }

    /// Uncommented, the file is the defaults exactly: every example value parses, and to the
    /// configuration `serve` has with no settings at all.
    @Test func envExampleUncommentedIsExactlyTheDefaults() async throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-env")
        defer { directory.remove() }
        let uncommented = try Self.exampleSettings().map { "\($0.key)=\($0.value)" }.joined(separator: "\n")
        let file = directory.appending(".env")
        try Data(uncommented.utf8).write(to: URL(fileURLWithPath: file))
        let configuration = try ServerConfiguration(reader: try await ServerConfiguration.reader(flags: [:], environment: [:], dotEnvPath: file))
        #expect(String(describing: configuration) == String(describing: ServerConfiguration()))
    }

    // MARK: systemd

    /// The unit's settings, by key (repeated keys in order).
    static func unitSettings() throws -> [String: [String]] {
        var settings: [String: [String]] = [:]
        for line in try read("deploy/ringrelay.service").split(separator: "\n") where !line.hasPrefix("#") && line.contains("=") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            settings[parts[0], default: []].append(parts.count > 1 ? parts[1] : "")
        }
        return settings
    }

    @Test func systemdUnitOutwaitsTheShutdownAndKeepsItsDataInItsStateDirectory() throws {
        let unit = try Self.unitSettings()
        let defaults = ServerConfiguration()
        let stop = try #require(unit["TimeoutStopSec"]?.first)
        #expect(try Self.seconds(stop) > defaults.shutdownGrace, "TimeoutStopSec=\(stop) must outlast --shutdown-grace")
        let files = try #require(unit["LimitNOFILE"]?.first)
        #expect((Int(files) ?? 0) > defaults.maxConnections, "LimitNOFILE=\(files) must exceed --max-connections")
        #expect(unit["ExecStart"]?.first?.hasSuffix("ringrelay serve --data-dir ${STATE_DIRECTORY}") == true)
        #expect(unit["StateDirectory"] == ["ringrelay"])
        for (key, value) in [
            ("DynamicUser", "yes"), ("ProtectSystem", "strict"), ("ProtectHome", "yes"), ("NoNewPrivileges", "yes"),
            ("PrivateTmp", "yes"), ("MemoryDenyWriteExecute", "yes"),
        ] {
            #expect(unit[key] == [value], "\(key)=\(value)")
        }
        #expect(unit["SystemCallFilter"]?.first == "@system-service")
    }

    static let systemdAnalyze = "/usr/bin/systemd-analyze"

    /// systemd's own checks: the unit parses with no warning (unknown keys are only warnings to
    /// systemd), and its exposure score stays low. ExecStart points at the built binary, since
    /// `verify` checks that the program exists.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: systemdAnalyze)))
    func systemdAcceptsTheUnit() throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-unit")
        defer { directory.remove() }
        let text = try Self.read("deploy/ringrelay.service")
        #expect(text.contains("/usr/local/lib/ringrelay/ringrelay serve"))
        let unit = directory.appending("ringrelay.service")
        try Data(text.replacingOccurrences(of: "/usr/local/lib/ringrelay/ringrelay", with: ServerProcess.binary.path).utf8)
            .write(to: URL(fileURLWithPath: unit))
        let verify = try Command.run(Self.systemdAnalyze, ["verify", unit])
        #expect(verify.status == 0 && verify.output.isEmpty, "\(verify.output)")
        // 0 is a unit with every protection, 100 one with none; this unit is at 12.
        let security = try Command.run(Self.systemdAnalyze, ["security", "--offline=true", "--threshold=20", unit])
        #expect(security.status == 0, "\(security.output)")
    }

    // MARK: Dockerfile and compose

    /// deploy/compose.yaml, as JSON (PyYAML, which scripts/test installs with the OpenAPI validator).
    static func compose() throws -> [String: Any] {
        let json = try WebhookTests.python(
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
            arguments: [repository.appendingPathComponent("deploy/compose.yaml").path])
        return try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(json)")
    }

    /// The image's port, data directory and health check, compose's service and nginx's upstream
    /// must name the same things; compose must set --trust-proxy and outwait the shutdown.
    @Test func imageComposeAndProxyAgree() throws {
        let dockerfile = try Self.read("Dockerfile")
        let port = try #require(dockerfile.firstMatch(of: /RINGRELAY_PORT=(\d+)/)?.output.1)
        let dataDirectory = try #require(dockerfile.firstMatch(of: /RINGRELAY_DATA_DIR=(\S+)/)?.output.1)
        #expect(dockerfile.contains("VOLUME \(dataDirectory)"))
        #expect(dockerfile.contains("\"http://127.0.0.1:\(port)/readyz\""), "the HEALTHCHECK probes the image's port")
        #expect(dockerfile.contains("USER ringrelay"))

        let compose = try Self.compose()
        let services = try #require(compose["services"] as? [String: [String: Any]])
        let ringrelay = try #require(services["ringrelay"])
        let environment = try #require(ringrelay["environment"] as? [String: String])
        #expect(environment["RINGRELAY_TRUST_PROXY"] == "true")
        #expect(environment["RINGRELAY_PORT"] == String(port))
        #expect(environment["RINGRELAY_DATA_DIR"] == String(dataDirectory))
        #expect((ringrelay["expose"] as? [String]) == [String(port)])
        #expect((ringrelay["volumes"] as? [String]) == ["ringrelay-data:\(dataDirectory)"])
        #expect((compose["volumes"] as? [String: Any])?.keys.contains("ringrelay-data") == true)
        #expect(ringrelay["read_only"] as? Bool == true)
        let grace = try #require(ringrelay["stop_grace_period"] as? String)
        #expect(try Self.seconds(grace) > ServerConfiguration().shutdownGrace)

        let proxy = try #require(services["proxy"])
        let dependency = (proxy["depends_on"] as? [String: [String: String]])?["ringrelay"]
        #expect(dependency?["condition"] == "service_healthy")
        let mounts = try #require(proxy["volumes"] as? [String])
        #expect(mounts.contains("./nginx/nginx.conf:/etc/nginx/nginx.conf:ro"))
        #expect(try Self.read("deploy/nginx/nginx.conf").contains("set $ringrelay http://ringrelay:\(port);"))
    }

    // MARK: The image's build stage

    /// The build stage's `COPY` lines must bring every path the manifest names, to the same place
    /// under the working directory, and `.dockerignore` must leave them in the context: a missing
    /// folder fails `docker build` at `swift build` (the CommitStamp plugin's once did).
    @Test func theImageBuildCopiesEverythingThePackageNeeds() throws {
        let copies = try Self.buildStageCopies()
        let ignored = try Self.dockerIgnorePatterns()
        for path in try Self.pathsTheManifestNames() {
            #expect(
                copies.contains { $0.destination == $0.source && (path == $0.source || path.hasPrefix($0.source + "/")) },
                "the Dockerfile's build stage does not COPY \(path) to ./\(path) (copies: \(copies))")
            let parents = path.split(separator: "/").indices.map { path.split(separator: "/")[...$0].joined(separator: "/") }
            for parent in parents {
                #expect(!ignored.contains { fnmatch($0, parent, FNM_PATHNAME) == 0 }, ".dockerignore leaves \(parent) out of the build context")
            }
        }
    }

    /// Package.swift, each target's folder (its `path`, or SwiftPM's default for its kind) and
    /// each resource in it, relative to the package.
    static func pathsTheManifestNames() throws -> [String] {
        struct Manifest: Decodable {
            struct Target: Decodable {
                struct Resource: Decodable { var path: String }
                var name: String
                var type: String
                var path: String?
                var resources: [Resource]?
            }
            var targets: [Target]
        }
        // `dump-package` evaluates a copy of the manifest alone, in a folder of its own: away from
        // the lock of the build that runs these tests.
        let directory = try TemporaryDirectory(prefix: "ringrelay-manifest")
        defer { directory.remove() }
        try FileManager.default.copyItem(atPath: repository.appendingPathComponent("Package.swift").path, toPath: directory.appending("Package.swift"))
        let dump = try Command.run(
            "/bin/sh", ["-c", #"cd "$1" && swift package --scratch-path .build dump-package > manifest.json"#, "dump", directory.path])
        try #require(dump.status == 0, "swift package dump-package: \(dump.output)")
        let manifest = try JSONDecoder().decode(Manifest.self, from: Data(contentsOf: URL(fileURLWithPath: directory.appending("manifest.json"))))
        let folders: [String: String] = ["regular": "Sources", "executable": "Sources", "macro": "Sources", "test": "Tests", "plugin": "Plugins"]
        var paths = ["Package.swift"]
        for target in manifest.targets {
            let folder = try target.path ?? "\(#require(folders[target.type], "a \(target.type) target: where does SwiftPM look?"))/\(target.name)"
            paths.append(folder)
            paths += (target.resources ?? []).map { "\(folder)/\($0.path)" }
        }
        return paths
    }

    /// What the build stage's `COPY` lines take from the context and where they put it, both
    /// relative to the stage's working directory.
    static func buildStageCopies() throws -> [(source: String, destination: String)] {
        let instructions = try read("Dockerfile").replacingOccurrences(of: "\\\n", with: " ").split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        let from = try #require(instructions.firstIndex { $0.hasPrefix("FROM ") && $0.hasSuffix(" AS build") }, "no build stage")
        let stage = instructions[(from + 1)...].prefix { !$0.hasPrefix("FROM ") }
        #expect(stage.contains("WORKDIR /src"))
        return try stage.filter { $0.hasPrefix("COPY ") }.flatMap { line in
            let words = line.split(separator: " ").dropFirst().map(String.init)
            try #require(words.count >= 2 && !words.contains { $0.hasPrefix("-") || $0.hasPrefix("[") }, "a COPY this test cannot read: \(line)")
            let destination = relativePath(words.last!)
            // A folder's contents go to the destination; a file copied into a folder (`./`,
            // `dir/`) lands there under its own name.
            let intoFolder = words.last!.hasSuffix("/") || destination.isEmpty
            return words.dropLast().map { source in
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: repository.appendingPathComponent(source).path, isDirectory: &isFolder)
                let name = URL(fileURLWithPath: source).lastPathComponent
                let lands = isFolder.boolValue || !intoFolder ? destination : destination.isEmpty ? name : "\(destination)/\(name)"
                return (relativePath(source), lands)
            }
        }
    }

    /// `./Sources/` as `Sources`, `./` as the empty path.
    private static func relativePath(_ path: String) -> String {
        var path = Substring(path)
        while path.hasPrefix("./") { path = path.dropFirst(2) }
        while path.hasSuffix("/") { path = path.dropLast() }
        return path == "." ? "" : String(path)
    }

    /// `.dockerignore`'s patterns, without comments and slashes at either end.
    static func dockerIgnorePatterns() throws -> [String] {
        try read(".dockerignore").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
            .map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "/")) }
    }

    /// `30s`, `1m` or `90` as a duration.
    static func seconds(_ text: String) throws -> Duration {
        let units: [Character: Int] = ["s": 1, "m": 60]
        let (number, unit) = text.last.flatMap { units[$0] }.map { (text.dropLast(), $0) } ?? (Substring(text), 1)
        return .seconds(try #require(Int(number), "not a duration: \(text)") * unit)
    }

    // MARK: nginx

    /// deploy/nginx/nginx.conf in front of a real `ringrelay serve --trust-proxy`, with only its
    /// addresses changed: TLS terminates there, plain HTTP is redirected, the operator's endpoints
    /// are refused, a Twilio webhook signed for the public https URL is accepted (and one signed
    /// for RingRelay's own address refused), and a device's live connection upgrades through it.
    @Test func nginxCarriesTLSWebhooksAndLiveConnectionsToTheServer() async throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-proxy")
        defer { directory.remove() }
        let admin = "proxy-test-admin-token-0123456789"
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", directory.appending("data"), "--trust-proxy", "--admin-token", admin, "--log-level", "warning"],
            directory: directory.path)
        defer { server.signal(SIGKILL) }
        let upstream = try await server.waitUntilListening()
        let certificate = try SelfSignedCertificate(commonName: "localhost")
        let proxy = try await ProxyUnderTest.start(in: directory, upstream: upstream, certificate: certificate)
        defer { proxy.stop() }

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([try NIOSSLCertificate(bytes: certificate.certificateDER, format: .der)])
        let http = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .init(tlsConfiguration: tls, redirectConfiguration: .disallow))
        do {
            try await Self.exercise(proxy, upstream: upstream, admin: admin, http: http, tls: tls)
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
    }

    /// The requests of ``nginxCarriesTLSWebhooksAndLiveConnectionsToTheServer()``.
    private static func exercise(_ proxy: ProxyUnderTest, upstream: String, admin: String, http: HTTPClient, tls: TLSConfiguration) async throws {
        let base = "https://127.0.0.1:\(proxy.tlsPort)"

        let description = try await http.send(.GET, "\(base)/openapi.yaml")
        #expect(description.status == 200 && description.body.hasPrefix("openapi:"), "\(description.body.prefix(300))")
        for path in ["/metrics", "/readyz", "/healthz"] {
            #expect(try await http.send(.GET, base + path).status == 403, "\(path) is refused at the proxy")
        }
        // The page at / and the proxy agree: its links for everyone answer through it, the ones
        // it lists for operators are the ones the proxy refuses.
        let page = try await http.send(.GET, base + "/")
        #expect(page.status == 200)
        let parts = page.body.components(separatedBy: #"id="operators""#)
        try #require(parts.count == 2, "the page lists its operators' links apart: \(page.body)")
        let links = parts.map { $0.matches(of: /href="([^"]*)"/).map { String($0.output.1) } }
        #expect(!links[0].isEmpty && !links[1].isEmpty, "\(links)")
        for link in links[0] {
            #expect(try await http.send(.GET, "\(base)/\(link)").status == 200, "\(link), linked for everyone, through the proxy")
        }
        for link in links[1] {
            #expect(try await http.send(.GET, "\(base)/\(link)").status == 403, "\(link), linked for operators, through the proxy")
        }
        let redirect = try await http.send(.GET, "http://127.0.0.1:\(proxy.plainPort)/v1/bindings")
        #expect(redirect.status == 301 && redirect.location == "https://127.0.0.1/v1/bindings", "\(redirect)")

        let created = try await http.send(.POST, "\(base)/v1/accounts", token: admin, json: #"{"name":"proxied"}"#)
        #expect(created.status == 201, "\(created.body)")
        let account = try JSONDecoder.ringRelay.decode(CreatedAccount.self, from: Data(created.body.utf8))
        let credentials = #"{"accountSid":"\#(WebhookTests.twilioSID)","authToken":"\#(WebhookTests.twilioToken)"}"#
        #expect(try await http.send(.PUT, "\(base)/v1/credentials/twilio", token: account.apiKey, json: credentials).status == 200)

        // Twilio signs the URL it posts to: the proxy's https URL. With the forwarded headers the
        // server checks that one, and answers 404 (nobody to ring) rather than 403.
        let body = WebhookTests.twilioBody(to: "client:nobody", messageID: "WBproxied")
        let path = "/v1/webhooks/twilio/\(account.id)?bodySHA256=\(WebhookTests.sha256(Array(body.utf8)))"
        let signedForProxy = try await http.send(
            .POST, base + path, json: body, headers: ["X-Twilio-Signature": WebhookTests.twilioSignature(url: base + path)])
        #expect(signedForProxy.status == 404, "\(signedForProxy.body)")
        let signedForUpstream = try await http.send(
            .POST, base + path, json: body, headers: ["X-Twilio-Signature": WebhookTests.twilioSignature(url: upstream + path)])
        #expect(signedForUpstream.status == 403, "\(signedForUpstream.body)")

        let minted = try await http.send(
            .POST, "\(base)/v1/access-tokens", token: account.apiKey, json: #"{"identity":"alice","deviceId":"phone-1","ttlSeconds":600}"#)
        let token = try JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: Data(minted.body.utf8)).token
        let frames = try await Self.pingOverLiveConnection(url: "wss://127.0.0.1:\(proxy.tlsPort)/v1/connect?access_token=\(token)", tls: tls)
        #expect(frames.first?.contains(#""type":"ready""#) == true, "\(frames)")
        #expect(frames.last?.contains(#""type":"pong""#) == true, "\(frames)")
        // The access token travels in the query; the proxy's log has the path only. nginx logs
        // a WebSocket once it has closed.
        let logged = #"GET /v1/connect HTTP/1.1" 101"#
        let deadline = ContinuousClock.now + .seconds(20)
        while !proxy.log.contains(logged), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(proxy.log.contains(logged), "\(proxy.log)")
        #expect(!proxy.log.contains(token))
    }

    /// Opens a live connection, sends a ping once the server's first frame has arrived, and
    /// returns the text frames up to the pong.
    static func pingOverLiveConnection(url: String, tls: TLSConfiguration) async throws -> [String] {
        var logger = Logger(label: "proxy-test-device")
        logger.logLevel = .critical
        let frames = Mutex<[String]>([])
        // NIOSSL sends no SNI for an IP address unless told a name; the certificate names localhost too.
        try await WebSocketClient.connect(url: url, configuration: .init(sniHostname: "localhost"), tlsConfiguration: tls, logger: logger) {
            inbound, outbound, _ in
            for try await message in inbound.messages(maxSize: 1 << 20) {
                guard case .text(let text) = message else { continue }
                let count = frames.withLock {
                    $0.append(text)
                    return $0.count
                }
                if count == 1 { try await outbound.write(.text(#"{"type":"ping"}"#)) }
                if text.contains(#""type":"pong""#) { return }
            }
        }
        return frames.withLock { $0 }
    }
}

/// Debian's nginx running deploy/nginx/nginx.conf with the listening ports and RingRelay's address
/// replaced (and temporary folders of its own), nothing else.
private struct ProxyUnderTest {
    let tlsPort: Int
    let plainPort: Int
    let process: Process
    let accessLog: String

    /// What nginx logged to standard output (its access log) so far.
    var log: String { (try? String(contentsOfFile: accessLog, encoding: .utf8)) ?? "" }

    static func start(in directory: TemporaryDirectory, upstream: String, certificate: SelfSignedCertificate) async throws -> ProxyUnderTest {
        let binary = try #require(
            ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "nginx is not installed (apt-get install nginx-light; scripts/test installs it)")
        try FileManager.default.createDirectory(atPath: directory.appending("tls"), withIntermediateDirectories: true)
        try Data(certificate.certificatePEM.utf8).write(to: URL(fileURLWithPath: directory.appending("tls/fullchain.pem")))
        try Data(certificate.privateKeyPEM.utf8).write(to: URL(fileURLWithPath: directory.appending("tls/privkey.pem")))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory.appending("tls/privkey.pem"))
        // Workers run as an unprivileged user and buffer large answers to files here.
        try FileManager.default.createDirectory(atPath: directory.appending("tmp"), withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.appending("tmp"))
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)

        let shipped = try DeploymentFilesTests.read("deploy/nginx/nginx.conf")
        var lastError = ""
        // A free port is found by binding and closing; another process may take it meanwhile.
        for _ in 0..<5 {
            let (tlsPort, plainPort) = (try freeLoopbackPort(), try freeLoopbackPort())
            let temporary = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map { "\($0)_temp_path \(directory.appending("tmp"));" }
            let configuration = try replacing(
                in: shipped,
                [
                    ("listen 443 ssl;", "listen 127.0.0.1:\(tlsPort) ssl;"), ("listen 80;", "listen 127.0.0.1:\(plainPort);"),
                    ("listen [::]:443 ssl;", ""), ("listen [::]:80;", ""), ("http://ringrelay:8080", upstream),
                    ("http {", "http {\n" + temporary.joined(separator: "\n")),
                ])
            let file = directory.appending("nginx.conf")
            try Data(configuration.utf8).write(to: URL(fileURLWithPath: file))
            let arguments = [
                "-c", file, "-p", directory.path, "-e", directory.appending("error.log"), "-g",
                "daemon off; pid \(directory.appending("nginx.pid"));",
            ]
            let check = try Command.run(binary, ["-t"] + arguments)
            #expect(check.status == 0, "nginx -t: \(check.output)")

            let accessLog = directory.appending("access.log")
            try Data().write(to: URL(fileURLWithPath: accessLog))
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = arguments
            process.standardOutput = FileHandle(forWritingAtPath: accessLog)
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            let deadline = ContinuousClock.now + .seconds(20)
            while process.isRunning, ContinuousClock.now < deadline, !canConnect(port: tlsPort) {
                try await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning, canConnect(port: tlsPort) {
                return ProxyUnderTest(tlsPort: tlsPort, plainPort: plainPort, process: process, accessLog: accessLog)
            }
            if process.isRunning { process.terminate() }
            lastError = (try? String(contentsOfFile: directory.appending("error.log"), encoding: .utf8)) ?? "no error log"
        }
        throw Unavailable("nginx did not start: \(lastError)")
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
    }

    /// `text` with each replacement made; a target missing from the shipped file fails the test,
    /// so the test never runs a configuration other than the one it means to.
    private static func replacing(in text: String, _ replacements: [(String, String)]) throws -> String {
        try replacements.reduce(text) { result, replacement in
            try #require(result.contains(replacement.0), "deploy/nginx/nginx.conf no longer has '\(replacement.0)'")
            return result.replacingOccurrences(of: replacement.0, with: replacement.1)
        }
    }

    private static func canConnect(port: Int) -> Bool {
        guard let fd = try? RawSocket.connected(port: port) else { return false }
        close(fd)
        return true
    }

    private static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw Unavailable("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    struct Unavailable: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

/// An answer, read whole.
private struct Answer: CustomStringConvertible {
    var status: UInt
    var body: String
    var location: String?
    var description: String { "\(status) \(location ?? "") \(body.prefix(300))" }
}

extension HTTPClient {
    /// Sends a request (a JSON body when given) and reads the whole answer.
    fileprivate func send(
        _ method: HTTPMethod, _ url: String, token: String? = nil, json: String? = nil, headers: [String: String] = [:]
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: json))
        }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 4 << 20)
        return Answer(status: response.status.code, body: String(buffer: body), location: response.headers.first(name: "Location"))
    }
}
