import Foundation
import RingRelayTesting
import Testing

/// What the CLI says when the server cannot be talked to, over real sockets: a closed port, a
/// server that hangs up, one that speaks the other side of TLS. Each is said plainly, as what it
/// is; `ringrelay phone` says it once while it keeps retrying.
@Suite struct ConnectionProblemTests {
    static let plainHTTPAnswer = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
    /// A TLS alert record (fatal, protocol_version): what a TLS server sends to a plain HTTP request.
    static let tlsAlert: [UInt8] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]

    /// `bindings list` against a server that answers its first bytes with `reply` and hangs up:
    /// nothing at all, a plain HTTP answer to a TLS handshake, a TLS alert to plain HTTP. Each is
    /// said as what it is (`URL` stands for the server's URL), not as a server that is down.
    @Test(
        arguments: [
            ([], "http", "The server at URL closed the connection without answering."),
            (plainHTTPAnswer, "https", "The TLS handshake with URL failed (the server does not speak TLS there; for a plain server use http://)."),
            (tlsAlert, "http", "The server at URL did not answer in HTTP. If it speaks TLS, use https://."),
        ] as [([UInt8], String, String)])
    func aServerThatIsNotWhatTheURLSaysIsSaidAsWhatItIs(reply: [UInt8], scheme: String, said: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await HangUpServer(reply: reply)
        let url = "\(scheme)://127.0.0.1:\(server.port)"
        let run = try await ServerProcess.run(
            ["bindings", "list", "--server", url], directory: directory.path, environment: ["RINGRELAY_TOKEN": "rrk_x"])
        await server.stop()
        #expect(run.status == 1)
        #expect(run.stderr == said.replacingOccurrences(of: "URL", with: url) + "\n")
        #expect(run.stdout.isEmpty)
        #expect(server.connections >= 1)
    }

    /// A phone with a device token and nowhere to connect names the URL and the reason on every
    /// retry in JSON, and keeps retrying.
    @Test func aPhoneWhoseServerIsDownSaysWhereAndWhy() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let url = "http://127.0.0.1:\(try CLITests.unusedPort())"
        let phone = try PhoneProcessTests.Phone(["--server", url, "--token", "not.a.token"], directory: directory.path)
        defer { phone.process.signal(SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(60)
        while phone.events.count(where: { $0["event"] == "disconnected" }) < 3, ContinuousClock.now < deadline, phone.process.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        let retries = phone.events.filter { $0["event"] == "disconnected" }
        #expect(retries.count >= 3, "stdout: \(phone.process.stdout) stderr: \(phone.process.stderr)")
        for retry in retries {
            #expect(
                retry["message"]
                    == "Cannot reach the server at \(url) (connection refused). Is 'ringrelay serve' running there? Set --server or RINGRELAY_URL.")
        }
        try await phone.stop()
    }

    /// In text, the phone says why once, however often it retries: here a server that refuses
    /// the upgrade with a bare 400 (as RingRelay did for a token it did not take, before it gave
    /// the router's 401 or 403).
    @Test func aPhoneSaysOnceWhyItIsNotConnected() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await HangUpServer(reply: Self.plainHTTPAnswer)
        let url = "http://127.0.0.1:\(server.port)"
        let phone = try ServerProcess(
            ["phone", "--server", url, "--token", "not.a.token", "--no-input", "--exit-after", "120s"], directory: directory.path)
        defer { phone.signal(SIGKILL) }
        let deadline = ContinuousClock.now + .seconds(60)
        while server.connections < 3, ContinuousClock.now < deadline, phone.isRunning {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(server.connections >= 3, "stdout: \(phone.stdout) stderr: \(phone.stderr)")
        phone.signal(SIGTERM)
        #expect(try await phone.waitForExit() == 0)
        await server.stop()
        let said = "The server at \(url) refused the live connection. Is the device token valid and unexpired? Retrying in the background.\n"
        #expect(phone.stdout == said + "Bye.\n", "\(phone.stdout)")
    }

    /// A server that hangs up on the upgrade request leaves the WebSocket client waiting; the
    /// phone gives up on the attempt, says so and tries again, instead of waiting silently.
    @Test func aPhoneWhoseServerHangsUpSaysSoAndRetries() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await HangUpServer(reply: [])
        let url = "http://127.0.0.1:\(server.port)"
        let phone = try PhoneProcessTests.Phone(["--server", url, "--token", "not.a.token"], directory: directory.path)
        defer { phone.process.signal(SIGKILL) }
        let retry = try await phone.waitFor("a retry", timeout: .seconds(90)) { $0["event"] == "disconnected" }
        #expect(retry["message"] == "The server at \(url) did not answer in time.")
        let deadline = ContinuousClock.now + .seconds(30)
        while server.connections < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(server.connections >= 2, "the phone tries again")
        try await phone.stop()
        await server.stop()
    }
}
