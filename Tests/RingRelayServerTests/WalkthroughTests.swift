import Foundation
import RingRelayTesting
import Synchronization
import Testing

/// The README's five-minute walk-through, run as written: the server and the simulators in one
/// "terminal", every other command in one bash session in a fresh directory, with the built
/// `ringrelay` on the PATH and free ports in place of 8080, 2197 and 8443. Each step must exit 0
/// and print what the README shows (see ``Walkthrough`` for the markers and the `…` rule).
@Suite struct WalkthroughTests {
    static let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("README.md")

    @Test func theReadmeWalkthroughRunsAsWritten() async throws {
        // The README's ports (the server's default, the simulators') and free ones to use instead.
        let ports = [8080: try CLITests.unusedPort(), 2197: try CLITests.unusedPort(), 8443: try CLITests.unusedPort()]
        var section = String(try Walkthrough.section(of: String(contentsOf: Self.readme, encoding: .utf8)))
        for (written, free) in ports {
            section = section.replacingOccurrences(of: #"(?<=[: ])\#(written)\b"#, with: "\(free)", options: .regularExpression)
        }
        let walkthrough = try Walkthrough(section[...])
        #expect(walkthrough.units.count > 20)

        let directory = try TemporaryDirectory()
        let harness = try TemporaryDirectory()
        defer {
            directory.remove()
            harness.remove()
        }
        let run = try WalkthroughRun(directory: directory.path, harness: harness.path, serverPort: try #require(ports[8080]))
        defer { run.terminate() }
        for (index, unit) in walkthrough.units.enumerated() {
            let printed: String
            switch unit.terminal {
            case .shell: printed = try await run.shell(unit.command, number: index)
            case .server: printed = try await run.server(unit.command)
            }
            #expect(
                Walkthrough.matches(printed, expected: unit.output),
                "step \(index): \(unit.command)\n--- README shows:\n\(unit.output)\n--- it printed:\n\(printed)")
        }
        try await run.finish()

        // Every file the walk-through wrote is in the data directory, which git ignores.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["ringrelay-data"])
        // No secret was ever on a command line, where `ps` shows it.
        let secrets = try run.secrets()
        #expect(secrets.count >= 6)
        let commandLines = try String(contentsOfFile: harness.appending("argv.log"), encoding: .utf8).split(separator: "\n")
        let leaks = commandLines.filter { line in secrets.contains { line.contains($0) } }.map { line in
            secrets.reduce(String(line)) { $0.replacingOccurrences(of: $1, with: "<secret>") }
        }
        #expect(leaks.isEmpty, "secrets on command lines, where ps shows them")
    }

    @Test func outputsMatchWithEllipsesAsWildcards() {
        #expect(Walkthrough.matches(#"{"id":"acc_06h0","name":"acme"}"#, expected: #"{"id":"acc_…","name":"acme"}"#))
        #expect(!Walkthrough.matches(#"{"id":"acc_06h0","name":"acme2"}"#, expected: #"{"id":"acc_…","name":"acme"}"#))
        #expect(Walkthrough.matches("a\nb\nc\nd", expected: "a\n…\nd"))
        #expect(Walkthrough.matches("a\nd", expected: "a\n…\nd"))
        #expect(!Walkthrough.matches("a\nb", expected: "a"))
        #expect(Walkthrough.matches("abc  \n\n", expected: "abc"))
        #expect(Walkthrough.matches("", expected: ""))
        #expect(!Walkthrough.matches("output", expected: ""))
        #expect(Walkthrough.matches("xaxbx", expected: "…a…b…"))
        #expect(!Walkthrough.matches("ab", expected: "a…ab"))
    }

    @Test func markedBlocksBecomeUnits() throws {
        let section = """
            <!-- walkthrough: terminal 1 -->
            ```console
            $ ringrelay serve --port 8080 \\
                --log-level warning
            RingRelay listening on http://127.0.0.1:8080
            ```

            <!-- walkthrough -->
            ```sh
            echo hi
            ```
            ```text
            hi
            ```

            ```sh
            not marked
            ```
            <!-- walkthrough -->
            ```console
            $ true
            $ echo a
            a
            ```
            """
        let units = try Walkthrough(section[...]).units
        #expect(
            units == [
                .init(
                    terminal: .server, command: "ringrelay serve --port 8080 \\\n    --log-level warning",
                    output: "RingRelay listening on http://127.0.0.1:8080"),
                .init(terminal: .shell, command: "echo hi", output: "hi"),
                .init(terminal: .shell, command: "true", output: ""),
                .init(terminal: .shell, command: "echo a", output: "a"),
            ])
    }
}

/// The processes of one walk-through: a bash session for the second terminal, the server and the
/// simulators of the first, and shims that log every `curl`, `ringrelay` and `python3` command line.
final class WalkthroughRun: Sendable {
    let directory: String
    let harness: String
    private let bash: ServerProcess
    private let input = Pipe()
    /// Both terminals' environment: the shims and `ringrelay` on the PATH, no `RINGRELAY_*`.
    private let environment: [String: String]
    /// The first terminal's: `RINGRELAY_PORT` stands in for the default port, 8080.
    private let serverEnvironment: [String: String]
    private let server = Mutex<ServerProcess?>(nil)
    private let simulators = Mutex<[ServerProcess]>([])

    init(directory: String, harness: String, serverPort: Int) throws {
        self.directory = directory
        self.harness = harness
        let shims = harness + "/bin"
        try FileManager.default.createDirectory(atPath: shims, withIntermediateDirectories: true)
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let tools: [String: String?] = [
            "curl": Self.which("curl", in: path), "python3": Self.which("python3", in: path), "ringrelay": ServerProcess.binary.path,
        ]
        for (name, real) in tools {
            let shim = "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '\(harness)/argv.log'\nexec '\(real ?? "/nonexistent/\(name)")' \"$@\"\n"
            try shim.write(toFile: "\(shims)/\(name)", atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: "\(shims)/\(name)")
        }
        guard FileManager.default.createFile(atPath: harness + "/argv.log", contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: harness + "/argv.log"])
        }
        environment = ["PATH": "\(shims):\(path)"]
        serverEnvironment = environment.merging(["RINGRELAY_PORT": "\(serverPort)"]) { $1 }
        // Foundation starts a child in a process group of its own; the shell's background jobs
        // stay in it (no job control), so terminate() can stop them all at once.
        bash = try ServerProcess(
            ["--noprofile", "--norc"], directory: directory, environment: environment, input: input, executable: URL(fileURLWithPath: "/bin/bash"))
        // A command that fails inside a unit fails the walk-through, even when a later one succeeds.
        try send(#"set -E; trap 'echo "$BASH_COMMAND: exit $?" >> "\#(harness)/errors"' ERR"#)
    }

    private static func which(_ tool: String, in path: String) -> String? {
        path.split(separator: ":").map { "\($0)/\(tool)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private func send(_ line: String) throws {
        try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Runs a unit in the second terminal's session and returns what it printed (stdout and stderr).
    func shell(_ command: String, number: Int) async throws -> String {
        let script = "\(harness)/\(number).sh"
        let output = "\(harness)/\(number).out"
        try command.write(toFile: script, atomically: true, encoding: .utf8)
        try send("source '\(script)' > '\(output)' 2>&1 < /dev/null; echo \"@@@ \(number) $?\"")
        let deadline = ContinuousClock.now + .seconds(120)
        while !bash.stdout.contains("@@@ \(number) ") {
            guard ContinuousClock.now < deadline, bash.process.isRunning else {
                let printed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
                throw Walkthrough.Problem("step \(number) did not finish: \(command)\nprinted: \(printed)\nbash: \(bash.stderr)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let printed = try String(contentsOfFile: output, encoding: .utf8)
        #expect(bash.stdout.contains("@@@ \(number) 0\n"), "step \(number) exited non-zero: \(command)\n\(printed)")
        let errors = (try? String(contentsOfFile: "\(harness)/errors", encoding: .utf8)) ?? ""
        #expect(errors.isEmpty, "step \(number): a command failed: \(errors)")
        try? FileManager.default.removeItem(atPath: "\(harness)/errors")
        return printed
    }

    /// Runs a command of the first terminal. `ringrelay serve` and `simulate` keep running (a new
    /// `serve` stops the running one first, with SIGINT as Ctrl-C); their output is what they
    /// printed until listening.
    func server(_ command: String) async throws -> String {
        let line = command.replacingOccurrences(of: "\\\n", with: " ").trimmingCharacters(in: .whitespaces)
        let background = line.hasSuffix("&") ? String(line.dropLast()) : line
        guard background.hasPrefix("ringrelay serve") || background.hasPrefix("ringrelay simulate") else {
            let run = try await ServerProcess.run(
                ["-c", line], directory: directory, environment: serverEnvironment, executable: URL(fileURLWithPath: "/bin/bash"))
            #expect(run.status == 0, "\(command): \(run.stderr)")
            return run.stdout + run.stderr
        }
        if background.hasPrefix("ringrelay serve"), let running = server.withLock({ $0.take() }) {
            running.signal(SIGINT)
            #expect(try await running.waitForExit() == 0)
        }
        let process = try ServerProcess(
            ["-c", "exec " + background], directory: directory, environment: serverEnvironment, executable: URL(fileURLWithPath: "/bin/bash"))
        if background.hasPrefix("ringrelay serve") {
            server.withLock { $0 = process }
        } else {
            simulators.withLock { $0.append(process) }
        }
        _ = try await process.waitUntilListening()
        return process.stdout
    }

    /// Ends the session and stops what still runs, each of which must exit cleanly.
    func finish() async throws {
        try input.fileHandleForWriting.close()
        #expect(try await bash.waitForExit() == 0, "\(bash.stderr)")
        for process in [server.withLock { $0 }].compactMap(\.self) + simulators.withLock({ $0 }) {
            process.signal(SIGTERM)
            #expect(try await process.waitForExit() == 0, "\(process.stderr)")
        }
    }

    /// Stops whatever still runs after a failed step: the shell's session with its background
    /// jobs, the server and the simulators. Nothing is left by then when every step passed.
    func terminate() {
        kill(-bash.process.processIdentifier, SIGKILL)
        for process in [server.withLock { $0 }].compactMap(\.self) + simulators.withLock({ $0 }) where process.process.isRunning {
            process.process.terminate()
        }
    }

    /// The secrets the walk-through handled: the admin token, the account keys and device tokens
    /// the server printed or answered, the webhook secrets and the private keys.
    func secrets() throws -> [String] {
        var texts = [try String(contentsOfFile: directory + "/ringrelay-data/admin-token", encoding: .utf8)]
        texts += ([server.withLock { $0 }].compactMap(\.self) + simulators.withLock({ $0 })).map(\.stdout)
        let outputs = try FileManager.default.contentsOfDirectory(atPath: harness).filter { $0.hasSuffix(".out") }
        texts += try outputs.map { try String(contentsOfFile: "\(harness)/\($0)", encoding: .utf8) }
        let all = texts.joined(separator: "\n")
        var secrets = Set(all.matches(of: /rr[ak]_[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/).map { String($0.output) })
        secrets.formUnion(["0123456789abcdef0123456789abcdef", "my-webhook-secret"])
        let p8 = try String(contentsOfFile: directory + "/ringrelay-data/AuthKey_TEST.p8", encoding: .utf8)
        let serviceAccount = try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: directory + "/ringrelay-data/service-account.json")))
        for key in [p8, (serviceAccount as? [String: Any])?["private_key"] as? String ?? ""] {
            // A line of the private key's base64.
            let line = key.split(separator: "\n").first { !$0.hasPrefix("-----") }
            secrets.insert(String(try #require(line).prefix(40)))
        }
        return Array(secrets)
    }
}
