import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import RingRelayWire
import Synchronization

/// `ringrelay serve` (this same executable) as a child process on its own data directory, for the
/// benchmarks that measure a real server: port 0, warning-level logs, no rate limit.
struct BenchServer {
    let process: Process
    /// `http://127.0.0.1:<port>`
    let base: String
    let adminToken: String
    /// The child's stdout, kept open so that its writes never fail.
    private let output: Pipe

    /// Starts the server with `arguments` added, and `environment` added to this process's, and
    /// waits until it listens.
    ///
    /// - Parameter limits: keep the server's default rate budgets and binding limits (a bench of
    ///   fair share); by default they are lifted, and a fan-out's callee may have 100,000 bindings.
    init(dataDirectory: String, arguments: [String] = [], environment: [String: String] = [:], limits: Bool = false) throws {
        adminToken = "bench-admin-token-0123456789"
        process = Process()
        let lifted = limits ? [] : ["--rate-limit", "0", "--max-bindings-per-identity", "100000"]
        let serve =
            [
                "serve", "--port", "0", "--data-dir", dataDirectory, "--admin-token", adminToken, "--log-level", "warning",
                // The load comes from one address, in numbers no real client reaches.
                "--max-connections", "1000000", "--max-connections-per-address", "1000000",
            ] + lifted + arguments
        // RINGRELAY_BENCH_WRAPPER="<command> <arguments>" runs the server as `<command> <arguments>
        // ringrelay serve …`: scripts/check-service-sandbox runs it under strace that way. The
        // wrapper must pass SIGTERM on and exit with the server; its own pid is the one measured.
        // (valgrind 3.19 and 3.24 stop on Swift binaries here before main: docs/BENCHMARKS.md.)
        if let wrapper = ProcessInfo.processInfo.environment["RINGRELAY_BENCH_WRAPPER"]?.split(separator: " ").map(String.init),
            let command = wrapper.first
        {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [command] + wrapper.dropFirst() + [Self.executable.path] + serve
        } else {
            process.executableURL = Self.executable
            process.arguments = serve
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        Interruption.onInterrupt { [process] in if process.isRunning { process.terminate() } }
        do {
            base = try Self.waitForAddress(output)
        } catch {
            process.terminate()
            throw error
        }
    }

    /// This executable, for starting children of it.
    static var executable: URL {
        // readlink(2) of the link itself: Foundation's resolvingSymlinksInPath walks "/proc/self"
        // first, and on some kernels and Foundation versions ends at "/proc/self" unresolved.
        URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
    }

    var pid: Int32 { process.processIdentifier }

    /// Creates the account `bench` and returns it with its API key.
    func createAccount(http: HTTPClient) async throws -> CreatedAccount {
        try JSONDecoder.ringRelay.decode(
            CreatedAccount.self, from: try await Setup(http: http, base: base).send(.POST, "/v1/accounts", adminToken, #"{"name":"bench"}"#))
    }

    /// Runs `body` with an HTTP client for this server (up to 64 connections a host) and shuts the client down after.
    func withHTTPClient<Result>(_ body: (HTTPClient) async throws -> Result) async throws -> Result {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        // A server that is gone (a killed instance) fails its requests within a second, as a
        // balancer would pass them on, instead of queueing them for the default 10 s.
        configuration.timeout.connect = .seconds(1)
        let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        let result: Result
        do {
            result = try await body(http)
        } catch {
            try? await http.shutdown()
            throw error
        }
        try await http.shutdown()
        return result
    }

    /// Stops the server as an operator would (SIGINT) and waits until it has exited; kills it if it
    /// is still there after `timeout`.
    func stop(timeout: Duration = .seconds(30)) async {
        guard process.isRunning else { return }
        process.interrupt()
        if await !process.exits(within: timeout) {
            printError("The server did not stop within \(timeout) of SIGINT; killed it.")
            kill(process.processIdentifier, SIGKILL)
        }
    }

    /// Kills the server if it still runs (the error path).
    func terminate() {
        if process.isRunning { process.terminate() }
    }

    /// Reads the child's stdout until it prints its address.
    private static func waitForAddress(_ pipe: Pipe) throws -> String {
        var text = ""
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let data = pipe.fileHandleForReading.availableData
            guard !data.isEmpty else { break }
            text += String(decoding: data, as: UTF8.self)
            if let range = text.range(of: #"listening on (http://[^\s]+)"#, options: .regularExpression) {
                return String(text[range].dropFirst("listening on ".count))
            }
        }
        throw ValidationError("The server did not start: \(text)")
    }
}

extension Process {
    /// Waits up to `timeout` for the process to exit, without blocking a thread; returns whether it did.
    func exits(within timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(50)) }
        return !isRunning
    }
}

/// What to undo when a benchmark is interrupted. Foundation starts child processes in process groups
/// of their own, so a Ctrl-C on the bench does not reach them: on SIGINT or SIGTERM the registered
/// actions run, newest first, and the bench exits.
enum Interruption {
    private static let state = Mutex<(actions: [@Sendable () -> Void], sources: [any DispatchSourceSignal])>(([], []))

    /// Runs `action` if the bench is interrupted.
    static func onInterrupt(_ action: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.actions.append(action)
            guard state.sources.isEmpty else { return }
            state.sources = [SIGINT, SIGTERM].map { signalNumber in
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler {
                    for action in Self.state.withLock({ $0.actions }).reversed() { action() }
                    exit(128 + signalNumber)
                }
                source.resume()
                return source
            }
        }
    }
}
