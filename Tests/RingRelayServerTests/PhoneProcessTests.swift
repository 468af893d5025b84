import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Testing

@testable import RingRelayCLI

/// `ringrelay phone` as a user runs it: child processes of the built executable against a live
/// server, read through their `--json` event lines.
@Suite struct PhoneProcessTests {
    /// One `ringrelay phone` child and the JSON events it printed.
    struct Phone {
        let process: ServerProcess

        /// A phone that reads no input (`--no-input`), or reads `input` when there is one.
        init(_ arguments: [String], directory: String, environment: [String: String] = [:], input: Pipe? = nil) throws {
            // --exit-after is a safety net: a phone never outlives a failed test for long.
            let options = ["phone", "--json", "--exit-after", "120s"] + (input == nil ? ["--no-input"] : [])
            process = try ServerProcess(options + arguments, directory: directory, environment: environment, input: input)
        }

        /// Every complete JSON line printed so far.
        var events: [[String: String]] {
            process.stdout.split(separator: "\n").compactMap { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
                return object.compactMapValues { $0 as? String }
            }
        }

        /// The events about one call, by name.
        func events(of callID: String) -> [String] {
            events.filter { $0["callId"] == callID }.compactMap { $0["event"] }
        }

        /// Waits until an event passes `match`.
        @discardableResult
        func waitFor(
            _ description: String, timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation,
            _ match: ([String: String]) -> Bool
        ) async throws -> [String: String] {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let event = events.first(where: match) { return event }
                try await Task.sleep(for: .milliseconds(20))
            }
            Issue.record("no \(description) within \(timeout); stdout: \(process.stdout) stderr: \(process.stderr)", sourceLocation: sourceLocation)
            throw CancellationError()
        }

        /// SIGTERM, then the exit status; the last line must be the `exit` event.
        func stop(sourceLocation: SourceLocation = #_sourceLocation) async throws {
            process.signal(SIGTERM)
            #expect(try await process.waitForExit() == 0, sourceLocation: sourceLocation)
            try await Task.sleep(for: .milliseconds(50))
            #expect(events.last?["event"] == "exit", "\(process.stdout)", sourceLocation: sourceLocation)
        }
    }

    /// A live in-process server with an account; `body` gets its URL and account key.
    ///
    /// The server's clock runs with real time, as the phones' clocks do: a phone ignores a ring
    /// whose end (45 s after the server's now) has passed by its own clock, and a clock that stood
    /// still at the start made every ring of a test starved past that on a loaded machine one the
    /// phones acknowledged and ignored.
    static func withServer(_ body: @Sendable (any TestClientProtocol, String, String, TemporaryDirectory) async throws -> Void) async throws {
        let server = try await TestServer.make(start: Date(), running: true)
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await server.withClient(.live) { client in
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            try await body(client, "http://127.0.0.1:\(try #require(client.port))", key, directory)
        }
    }

    @Test func twoPhonesOfOneIdentityRingAndTheAutoAnswerWins() async throws {
        try await Self.withServer { client, url, key, directory in
            let bob1 = try Phone(
                ["--server", url, "--api-key", key, "--identity", "bob", "--device-id", "bob-1", "--auto-answer", "300ms"],
                directory: directory.path)
            let bob2 = try Phone(["--server", url, "--api-key", key, "--identity", "bob", "--device-id", "bob-2"], directory: directory.path)
            let ready1 = try await bob1.waitFor("ready") { $0["event"] == "ready" }
            #expect(ready1["identity"] == "bob")
            #expect(ready1["deviceId"] == "bob-1")
            try await bob2.waitFor("ready") { $0["event"] == "ready" }

            let response = try await client.send(
                .post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob","displayName":"Alice","avatarUrl":"https://cdn.example.com/alice.png"}"#)
            #expect(response.status == .created)
            let call = try response.decode(CallResource.self)

            try await bob1.waitFor("connected") { $0["event"] == "connected" && $0["callId"] == call.id }
            let ended = try await bob2.waitFor("ended") { $0["event"] == "ended" && $0["callId"] == call.id }
            #expect(ended["reason"] == "answeredElsewhere")
            #expect(bob1.events(of: call.id) == ["incoming", "connected"])
            #expect(bob2.events(of: call.id) == ["incoming", "ended"])
            let incoming = bob2.events.first { $0["event"] == "incoming" }
            #expect(incoming?["from"] == "alice")
            #expect(incoming?["displayName"] == "Alice")
            #expect(incoming?["avatarUrl"] == "https://cdn.example.com/alice.png")
            #expect(incoming?["media"] == "audio")

            let record = try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
            #expect(record.state == "accepted")
            #expect(record.answeredBy == "bob-1")
            // Quitting hangs up the call in progress.
            try await bob1.stop()
            try await bob2.stop()
            #expect(try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self).state == "ended")
        }
    }

    /// A phone whose output nobody reads any more (`ringrelay phone --json | head -1`, a test that
    /// gave up) quits at its next line, as a program killed by SIGPIPE would; it used to stop on a
    /// fatal error in `FileHandle.write`, and its crash report cost seconds of CPU.
    @Test func aPhoneWhoseReaderIsGoneQuitsWithoutCrashing() async throws {
        try await Self.withServer { _, url, key, directory in
            let process = Process()
            process.executableURL = ServerProcess.binary
            process.arguments = ["phone", "--json", "--no-input", "--exit-after", "60s", "--server", url, "--identity", "bob", "--device-id", "bob-1"]
            process.currentDirectoryURL = URL(fileURLWithPath: directory.path)
            process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RINGRELAY_") }.merging(["RINGRELAY_TOKEN": key]) { $1 }
            let stdout = Pipe()
            let stderr = Pipe()
            process.standardOutput = stdout
            process.standardError = stderr
            process.standardInput = FileHandle.nullDevice
            try process.run()
            // Nobody will read: the phone's first event line (`ready`) finds the pipe closed.
            try stdout.fileHandleForReading.close()
            let started = ContinuousClock.now
            while process.isRunning, ContinuousClock.now - started < .seconds(50) { try await Task.sleep(for: .milliseconds(50)) }
            #expect(!process.isRunning, "the phone did not quit")
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            let errors = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationReason == .exit && process.terminationStatus == 0, "\(errors.prefix(2000))")
            #expect(!errors.contains("Fatal error"), "\(errors.prefix(2000))")
        }
    }

    @Test func aScriptedCallerCallsAndHangsUp() async throws {
        try await Self.withServer { client, url, key, directory in
            let bobToken = try await client.accessToken(identity: "bob", deviceID: "bob-1", key: key)
            let bob = try Phone(["--server", url, "--token", bobToken, "--auto-answer", "200ms"], directory: directory.path)
            let ready = try await bob.waitFor("ready") { $0["event"] == "ready" }
            #expect(ready["deviceId"] == "bob-1")

            let alice = try Phone(
                ["--server", url, "--api-key", key, "--identity", "alice", "--call", "bob", "--hangup-after", "500ms"],
                directory: directory.path)
            let outgoing = try await alice.waitFor("outgoing") { $0["event"] == "outgoing" }
            #expect(outgoing["to"] == "bob")
            let callID = try #require(outgoing["callId"])
            let aliceEnded = try await alice.waitFor("ended") { $0["event"] == "ended" }
            #expect(aliceEnded["reason"] == "local")
            let bobEnded = try await bob.waitFor("ended") { $0["event"] == "ended" }
            #expect(bobEnded["reason"] == "remoteEnded")
            #expect(alice.events(of: callID) == ["outgoing", "connected", "ended"])
            #expect(bob.events(of: callID) == ["incoming", "connected", "ended"])
            try await alice.stop()
            try await bob.stop()
        }
    }

    /// A ring group from the phone: `--call` twice with `--ring-all` rings both callees at once,
    /// and the caller prints each callee's answer or decline, and connects once.
    @Test func aScriptedRingGroupPrintsEachCalleesAnswer() async throws {
        try await Self.withServer { client, url, key, directory in
            let callee = { (identity: String, script: String) in
                try Phone(
                    ["--server", url, "--api-key", key, "--identity", identity, "--device-id", "\(identity)-1", script],
                    directory: directory.path)
            }
            let bob = try callee("bob", "--auto-answer=200ms")
            let carol = try callee("carol", "--auto-reject")
            for phone in [bob, carol] { try await phone.waitFor("ready") { $0["event"] == "ready" } }

            let alice = try Phone(
                ["--server", url, "--api-key", key, "--identity", "alice", "--call", "bob", "--call", "carol", "--ring-all"],
                directory: directory.path)
            let outgoing = try await alice.waitFor("outgoing") { $0["event"] == "outgoing" }
            #expect(outgoing["mode"] == "all")
            let callID = try #require(outgoing["callId"])
            try await alice.waitFor("bob joined") { $0["event"] == "participant" && $0["identity"] == "bob" && $0["state"] == "accepted" }
            try await alice.waitFor("carol declined") { $0["event"] == "participant" && $0["identity"] == "carol" && $0["state"] == "declined" }
            try await alice.waitFor("connected") { $0["event"] == "connected" }
            #expect(alice.events(of: callID).filter { $0 == "connected" }.count == 1)
            #expect(try await client.send(.get, "/v1/calls/\(callID)", token: key).decode(CallResource.self).mode == "all")

            // Quitting hangs up: Bob's call ends.
            try await alice.stop()
            let ended = try await bob.waitFor("ended") { $0["event"] == "ended" && $0["callId"] == callID }
            #expect(ended["reason"] == "remoteEnded")
            try await bob.stop()
            try await carol.stop()
        }
    }

    /// The end of standard input quits the phone as `q` does, hanging up its call; the account
    /// key comes from the environment, never the command line.
    @Test func theEndOfInputQuitsAndHangsUp() async throws {
        try await Self.withServer { client, url, key, directory in
            let input = Pipe()
            let bob = try Phone(
                ["--server", url, "--identity", "bob", "--device-id", "bob-1", "--auto-answer", "100ms"], directory: directory.path,
                environment: ["RINGRELAY_TOKEN": key], input: input)
            try await bob.waitFor("ready") { $0["event"] == "ready" }
            let call = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#).decode(CallResource.self)
            try await bob.waitFor("connected") { $0["event"] == "connected" && $0["callId"] == call.id }
            // The answer has reached the server, so there is a call in progress to hang up.
            let deadline = ContinuousClock.now + .seconds(30)
            while try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self).state != "accepted" {
                try #require(ContinuousClock.now < deadline, "bob's answer never reached the server")
                try await Task.sleep(for: .milliseconds(20))
            }

            try input.fileHandleForWriting.close()
            #expect(try await bob.process.waitForExit() == 0)
            try await Task.sleep(for: .milliseconds(50))
            #expect(bob.events.contains { $0["event"] == "ended" && $0["callId"] == call.id && $0["reason"] == "local" }, "\(bob.process.stdout)")
            #expect(bob.events.last?["event"] == "exit")
            let record = try await client.send(.get, "/v1/calls/\(call.id)", token: key).decode(CallResource.self)
            #expect(record.state == "ended")
            #expect(record.endedBy == "bob")
        }
    }

    /// A sealed call between two phones with key files: the caller's name travels only in the
    /// box, which the callee's phone opens; the server's record knows nothing of it.
    @Test func twoPhonesWithKeyFilesPlaceAndAnswerASealedCall() async throws {
        try await Self.withServer { client, url, key, directory in
            let bobKey = directory.appending("bob.key")
            let aliceKey = directory.appending("alice.key")
            // An older phone left its key on an `apns_voip` binding with a made-up token, in its binding file.
            let old = try await client.createBinding(
                #"{"identity":"bob","type":"apns_voip","token":"\#(String(repeating: "0f", count: 32))","deviceId":"bob-1"}"#, token: key)
            try JSONEncoder().encode([RegisteredBinding(id: old.id, type: .apnsVoIP, token: old.token)])
                .write(to: URL(fileURLWithPath: bobKey + ".bindings.json"))
            let bob = try Phone(
                ["--server", url, "--api-key", key, "--identity", "bob", "--device-id", "bob-1", "--key-file", bobKey, "--auto-answer", "300ms"],
                directory: directory.path)
            let bobBinding = try await bob.waitFor("key") { $0["event"] == "key" }
            #expect(bobBinding["bindingId"]?.hasPrefix("bnd_") == true)
            try await bob.waitFor("ready") { $0["event"] == "ready" }

            let alice = try Phone(
                [
                    "--server", url, "--api-key", key, "--identity", "alice", "--device-id", "alice-1", "--key-file", aliceKey,
                    "--sealed", "--call", "bob", "--display-name", "Alice Liddell", "--hangup-after", "1s",
                ],
                directory: directory.path)
            let outgoing = try await alice.waitFor("outgoing") { $0["event"] == "outgoing" }
            let callID = try #require(outgoing["callId"])
            // Bob's phone rings at once, then shows Alice from the box it opened.
            let opened = try await bob.waitFor("opened") { $0["event"] == "opened" && $0["callId"] == callID }
            #expect(opened["from"] == "alice")
            #expect(opened["displayName"] == "Alice Liddell")
            #expect(opened["media"] == "audio")
            try await bob.waitFor("ended") { $0["event"] == "ended" && $0["callId"] == callID }
            // Bob's phone may answer before the box opened: the order of those two varies.
            let bobEvents = bob.events(of: callID)
            #expect(bobEvents.first == "incoming" && bobEvents.last == "ended" && Set(bobEvents) == ["incoming", "opened", "connected", "ended"])
            #expect(alice.events(of: callID) == ["outgoing", "connected", "ended"])
            // The first sealed call to Bob records his keys: nothing to report.
            #expect(!alice.events.contains { $0["event"] == "keysChanged" })

            let record = try await client.send(.get, "/v1/calls/\(callID)", token: key).decode(CallResource.self)
            #expect(record.sealed == true)
            #expect(record.displayName == nil)
            #expect(record.metadata == nil)
            let keys = try await client.send(.get, "/v1/identities/bob/keys", token: key).decode(DeviceKeyList.self)
            #expect(keys.data.map(\.bindingId) == [bobBinding["bindingId"]])
            #expect(keys.data.first?.deviceId == "bob-1")
            // The key rides on a `live` binding, and the old `apns_voip` one is gone.
            #expect(keys.data.first?.type == "live")
            let bobsBindings = try await client.send(.get, "/v1/bindings?identity=bob", token: key).decode(BindingList.self)
            #expect(bobsBindings.data.map(\.id) == [bobBinding["bindingId"]])

            try await alice.stop()
            try await bob.stop()
            // Away, the phone has nothing the server could push to: a call finds no device.
            let away = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#)
            #expect(away.status == .notFound)
            #expect(away.errorCode == "no_reachable_device")
            // The keys stayed in their files, only their owner may read them, and no output showed them.
            for path in [bobKey, aliceKey] {
                let attributes = try FileManager.default.attributesOfItem(atPath: path)
                #expect((attributes[.posixPermissions] as? Int) == 0o600)
                let pem = try String(contentsOfFile: path, encoding: .utf8)
                let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
                for phone in [alice, bob] {
                    #expect(!phone.process.stdout.contains(body) && !phone.process.stderr.contains(body))
                    #expect(!phone.process.stdout.contains("PRIVATE KEY"))
                }
            }
            #expect(FileManager.default.fileExists(atPath: bobKey + ".opened-invites.json"))
            #expect(FileManager.default.fileExists(atPath: aliceKey + ".known-device-keys.json"))
        }
    }

    /// Bob's phone comes back with a new key: the next sealed call tells Alice's phone his keys
    /// changed; and when his device's key on the server is not his, his phone refuses the box and
    /// says why.
    @Test func aNewKeyIsReportedToTheCallerAndAnUnopenableBoxIsRefused() async throws {
        try await Self.withServer { client, url, key, directory in
            try await Self.replaceBobsKeyBetweenSealedCalls(client: client, url: url, key: key, directory: directory)
        }
    }

    /// The steps of ``aNewKeyIsReportedToTheCallerAndAnUnopenableBoxIsRefused()``, outside the
    /// server closure (Swift 6.3.1's region analysis crashes on them inside it).
    static func replaceBobsKeyBetweenSealedCalls(
        client: any TestClientProtocol, url: String, key: String, directory: TemporaryDirectory
    ) async throws {
        let bobKey = directory.appending("bob.key")
        let bobArguments = [
            "--server", url, "--api-key", key, "--identity", "bob", "--device-id", "bob-1", "--key-file", bobKey, "--auto-answer", "200ms",
        ]
        // Each run of Alice's phone places one sealed call; her key file and the keys she
        // sealed to before carry over from run to run.
        let aliceArguments = [
            "--server", url, "--api-key", key, "--identity", "alice", "--key-file", directory.appending("alice.key"), "--sealed", "--call", "bob",
            "--hangup-after", "500ms",
        ]

        let bob1 = try Phone(bobArguments, directory: directory.path)
        let first = try await bob1.waitFor("key") { $0["event"] == "key" }
        try await bob1.waitFor("ready") { $0["event"] == "ready" }
        let alice1 = try Phone(aliceArguments, directory: directory.path)
        let outgoing1 = try await alice1.waitFor("outgoing") { $0["event"] == "outgoing" }
        let firstCall = try #require(outgoing1["callId"])
        try await bob1.waitFor("opened") { $0["event"] == "opened" && $0["callId"] == firstCall }
        try await alice1.waitFor("ended") { $0["event"] == "ended" && $0["callId"] == firstCall }
        #expect(!alice1.events.contains { $0["event"] == "keysChanged" })
        try await alice1.stop()
        try await bob1.stop()

        // A new key on the same device: the old binding is deleted, the new one listed.
        try FileManager.default.removeItem(atPath: bobKey)
        let bob2 = try Phone(bobArguments, directory: directory.path)
        let second = try await bob2.waitFor("key") { $0["event"] == "key" }
        #expect(second["bindingId"] != first["bindingId"])
        #expect(second["keyId"] != first["keyId"])
        let keys = try await client.send(.get, "/v1/identities/bob/keys", token: key).decode(DeviceKeyList.self)
        #expect(keys.data.map(\.bindingId) == [second["bindingId"]])
        try await bob2.waitFor("ready") { $0["event"] == "ready" }
        let alice2 = try Phone(aliceArguments, directory: directory.path)
        let outgoing2 = try await alice2.waitFor("outgoing") { $0["event"] == "outgoing" }
        let secondCall = try #require(outgoing2["callId"])
        let change = try await alice2.waitFor("keysChanged") { $0["event"] == "keysChanged" }
        #expect(change["identity"] == "bob")
        // The report names Bob's new key.
        let reports = alice2.process.stdout.split(separator: "\n").filter { $0.contains("keysChanged") }
        #expect(reports.count == 1 && reports[0].contains(second["keyId"] ?? "no key id"), "\(reports)")
        try await bob2.waitFor("opened") { $0["event"] == "opened" && $0["callId"] == secondCall }
        try await alice2.waitFor("ended") { $0["event"] == "ended" && $0["callId"] == secondCall }
        try await alice2.stop()

        // Someone with the account key puts a key of theirs on Bob's device and removes his:
        // Alice's phone reports it, and Bob's phone cannot open the box sealed to it.
        let foreignKey = P256.KeyAgreement.PrivateKey().publicKey.x963Representation.base64EncodedString()
        let foreign = try await client.send(
            .post, "/v1/bindings", token: key,
            json:
                #"{"identity":"bob","type":"apns_voip","token":"\#(String(repeating: "ab", count: 32))","deviceId":"bob-1","publicKey":"\#(foreignKey)"}"#
        )
        #expect(foreign.status == .created)
        #expect(try await client.send(.delete, "/v1/bindings/\(try #require(second["bindingId"]))", token: key).status == .noContent)
        let alice3 = try Phone(aliceArguments, directory: directory.path)
        let outgoing3 = try await alice3.waitFor("outgoing") { $0["event"] == "outgoing" }
        let thirdCall = try #require(outgoing3["callId"])
        try await alice3.waitFor("keysChanged") { $0["event"] == "keysChanged" }
        let refused = try await bob2.waitFor("refused") { $0["event"] == "refused" && $0["callId"] == thirdCall }
        #expect(refused["reason"] == "wrongKey")
        #expect(refused["message"]?.contains("another public key") == true)
        let ended = try await bob2.waitFor("ended") { $0["event"] == "ended" && $0["callId"] == thirdCall }
        #expect(ended["reason"] == "failed")
        #expect(!bob2.events(of: thirdCall).contains("opened"))
        try await bob2.stop()
        try await alice3.stop()
    }

    @Test func badSignInFailsFastWithTheServersMessage() async throws {
        try await Self.withServer { _, url, key, directory in
            let run = try await ServerProcess.run(
                ["phone", "--server", url, "--api-key", "rrk_not-a-key", "--identity", "bob"], directory: directory.path)
            #expect(run.status == 1)
            #expect(run.stderr.contains("401"), "\(run.stderr)")
            // A sealed call needs the phone's key.
            let keyless = try await ServerProcess.run(
                ["phone", "--server", url, "--api-key", key, "--identity", "bob", "--sealed", "--no-input"], directory: directory.path)
            #expect(keyless.status != 0)
            #expect(keyless.stderr.contains("--key-file"), "\(keyless.stderr)")
            // A key file others may read stops the phone before it signs in, without showing the key.
            let loose = directory.appending("loose.key")
            _ = try PhoneKeyFile.loadOrCreate(at: loose)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: loose)
            let refused = try await ServerProcess.run(
                ["phone", "--server", url, "--api-key", key, "--identity", "bob", "--key-file", loose, "--no-input"], directory: directory.path)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("chmod 600") && !refused.stderr.contains("PRIVATE KEY"), "\(refused.stderr)")
            let missing = try await ServerProcess.run(["phone", "--server", url], directory: directory.path)
            #expect(missing.status != 0)
            #expect(missing.stderr.contains("--token"), "\(missing.stderr)")
        }
    }

    @Test func durationsAndCommandsParse() {
        #expect(PhoneDuration(argument: "500ms")?.duration == .milliseconds(500))
        #expect(PhoneDuration(argument: "1.5s")?.duration == .milliseconds(1500))
        #expect(PhoneDuration(argument: "2")?.duration == .seconds(2))
        #expect(PhoneDuration(argument: "1m")?.duration == .seconds(60))
        #expect(PhoneDuration(argument: "soon") == nil)
        #expect(PhoneDuration(argument: "-1s") == nil)
        #expect(Softphone.Command(line: "a") == .answer)
        #expect(Softphone.Command(line: "  c   carol ") == .call(["carol"], all: false, sealed: false))
        #expect(Softphone.Command(line: "c carol Sealed") == .call(["carol"], all: false, sealed: true))
        #expect(Softphone.Command(line: "c carol dave") == .call(["carol", "dave"], all: false, sealed: false))
        #expect(Softphone.Command(line: "c carol dave ALL") == .call(["carol", "dave"], all: true, sealed: false))
        #expect(Softphone.Command(line: "c carol dave sealed all") == .call(["carol", "dave"], all: true, sealed: true))
        // A lone keyword is an identity.
        #expect(Softphone.Command(line: "c all") == .call(["all"], all: false, sealed: false))
        #expect(Softphone.Command(line: "c") == .unknown("c"))
        #expect(Softphone.Command(line: "Q") == .quit)
        #expect(Softphone.Command(line: "   ") == nil)
    }

    @Test func theTextShowsTheCallersNameAndPicture() throws {
        let avatar = try #require(URL(string: "https://cdn.example.com/alice.png"))
        #expect(
            TerminalCallUI.describe(CallParty(identity: "alice", displayName: "Alice", avatarURL: avatar))
                == "Alice (alice, avatar https://cdn.example.com/alice.png)")
        #expect(TerminalCallUI.describe(CallParty(identity: "alice", avatarURL: avatar)) == "alice (avatar https://cdn.example.com/alice.png)")
        #expect(TerminalCallUI.describe(CallParty(identity: "alice", displayName: "Alice")) == "Alice (alice)")
        #expect(TerminalCallUI.describe(CallParty(identity: "alice")) == "alice")
    }
}
