import Foundation
import RingRelayTesting
import Synchronization

/// The real `ringrelay` executable, run as a child process.
final class ServerProcess: Sendable {
    /// Text a pipe has delivered so far.
    final class Collected: Sendable {
        let text = Mutex("")
    }

    let process: Process
    private let output = Collected()
    private let errors = Collected()

    /// The `ringrelay` binary built next to this test bundle.
    static var binary: URL {
        // readlink(2) of the link itself (resolvingSymlinksInPath can stop at "/proc/self").
        let executable = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
        return executable.deletingLastPathComponent().appendingPathComponent("ringrelay")
    }

    /// Starts `ringrelay` (or another `executable`) with `arguments` in `directory`; its standard
    /// input is `input`, or `/dev/null`.
    init(
        _ arguments: [String], directory: String, environment: [String: String] = [:], input: Pipe? = nil,
        executable: URL = ServerProcess.binary
    ) throws {
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        // A clean environment: no RINGRELAY_* from the developer's shell leaks into the test.
        var base = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RINGRELAY_") }
        base.merge(environment) { $1 }
        process.environment = base
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = input ?? FileHandle.nullDevice
        try process.run()
        // A thread per pipe, reading until the child closes it. FileHandle's readabilityHandler
        // (a dispatch source) crashed the test process in libdispatch's event loop now and then
        // when a handle went away with its source still registered.
        Self.collect(stdout.fileHandleForReading, into: output)
        Self.collect(stderr.fileHandleForReading, into: errors)
    }

    /// Reads a pipe into `collected`; with `RINGRELAY_TEST_VERBOSE=1`, echoes it to the test's
    /// standard error as well (otherwise a child's logs never reach the console).
    private static func collect(_ handle: FileHandle, into collected: Collected) {
        Thread.detachNewThread {
            while true {
                let data = handle.availableData
                if data.isEmpty { return }
                collected.text.withLock { $0 += String(decoding: data, as: UTF8.self) }
                if TestLogging.isVerbose { FileHandle.standardError.write(data) }
            }
        }
    }

    /// Everything printed to standard output so far.
    var stdout: String { output.text.withLock { $0 } }
    /// Everything printed to standard error so far.
    var stderr: String { errors.text.withLock { $0 } }

    /// Waits until the server prints its address and returns the base URL.
    func waitUntilListening(timeout: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let range = stdout.range(of: #"listening on (https?://[^\s]+)"#, options: .regularExpression) {
                return String(stdout[range].dropFirst("listening on ".count))
            }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessError.notListening(stdout: stdout, stderr: stderr)
    }

    /// The process's resident memory, in bytes (from `/proc`).
    var residentBytes: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
        return (line?.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0) * 1024
    }

    /// Sends a signal.
    func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Whether the process has not exited yet.
    var isRunning: Bool { process.isRunning }

    /// Waits for the process to exit and returns its status.
    func waitForExit(timeout: Duration = .seconds(90)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.terminate()
                throw ProcessError.didNotExit
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    /// Its standard error from a crash report's first line (Swift's backtracer prints the cause
    /// first and the registers last), or the last 3,000 characters when nothing crashed.
    var crashReport: String {
        let log = stderr
        guard let start = ["*** ", "Fatal error", "Program crashed"].compactMap({ log.range(of: $0)?.lowerBound }).min() else {
            return String(log.suffix(3000))
        }
        let from = log.index(start, offsetBy: -1500, limitedBy: log.startIndex) ?? log.startIndex
        return String(log[from...].prefix(6000))
    }

    /// Runs `ringrelay` (or another `executable`) to completion and returns its status and output.
    static func run(
        _ arguments: [String], directory: String, environment: [String: String] = [:], executable: URL = ServerProcess.binary
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ServerProcess(arguments, directory: directory, environment: environment, executable: executable)
        let status = try await child.waitForExit(timeout: .seconds(60))
        // Let the readability handlers drain what is left in the pipes.
        try await Task.sleep(for: .milliseconds(50))
        return (status, child.stdout, child.stderr)
    }

    enum ProcessError: Error {
        case notListening(stdout: String, stderr: String)
        case didNotExit
    }
}
