import ArgumentParser
import Foundation
import RingRelayKit
import RingRelayTesting
import Testing

@testable import RingRelayCLI

/// The `ringrelay` executable's own behaviour, whatever the verb: `--version`, and what it says
/// when the server is down or the command line is wrong.
@Suite struct CLITests {
    /// Every verb's command line, from `RingRelayCommand`'s tree: `["accounts", "create"]`, ….
    static func verbs(under command: any ParsableCommand.Type = RingRelayCommand.self, path: [String] = []) -> [[String]] {
        let subcommands = command.configuration.subcommands
        guard !subcommands.isEmpty else { return [path] }
        return [path] + subcommands.flatMap { verbs(under: $0, path: path + [$0._commandName]) }
    }

    /// The repository this test file is in.
    static let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func everyVerbPrintsTheVersionWithTheCommit() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let verbs = Self.verbs()
        #expect(verbs.contains(["accounts", "create"]))
        #expect(verbs.contains(["phone"]))
        for verb in verbs {
            let run = try await ServerProcess.run(verb + ["--version"], directory: directory.path)
            #expect(run.status == 0, "\(verb): \(run.stderr)")
            #expect(run.stdout == RingRelayCommand.version + "\n", "\(verb)")
        }
        let commit = try #require(RingRelayCommand.version.firstMatch(of: /^ringrelay commit (unknown|([0-9a-f]{12})(-dirty)?)$/))
        // Built from a git checkout, the commit must be one of this repository's.
        if let hash = commit.2, Self.git(["rev-parse", "--git-dir"]) {
            #expect(Self.git(["cat-file", "-e", "\(hash)^{commit}"]), "\(hash) is not a commit of \(Self.packageDirectory.path)")
        }
    }

    @Test func aServerThatIsDownIsSaidPlainlyOnce() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let url = "http://127.0.0.1:\(try Self.unusedPort())"
        let run = try await ServerProcess.run(
            ["bindings", "list", "--server", url], directory: directory.path, environment: ["RINGRELAY_TOKEN": "rrk_x"])
        #expect(run.status == 1)
        #expect(
            run.stderr
                == "Cannot reach the server at \(url) (connection refused). Is 'ringrelay serve' running there? Set --server or RINGRELAY_URL.\n")
        #expect(run.stdout.isEmpty)
    }

    @Test func aVerbsUsageErrorShowsThatVerbsUsage() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // The token is looked for when the verb runs, not while the arguments are parsed.
        let run = try await ServerProcess.run(["accounts", "list"], directory: directory.path)
        #expect(run.status == 64)
        #expect(run.stderr.hasPrefix("Error: Pass --token or set RINGRELAY_ADMIN_TOKEN or RINGRELAY_TOKEN.\nUsage: ringrelay accounts list "))
        #expect(run.stderr.contains("See 'ringrelay accounts list --help' for more information."))
        #expect(!run.stderr.contains("<subcommand>"))
    }

    /// Keys and certificates the simulators write by default, a throwaway `.p8` like the
    /// README's, any PEM file, and a phone's key file with the files it keeps beside it stay out
    /// of git when a try-out leaves them at the top of a checkout; the README's phones keep their
    /// keys where git ignores them.
    @Test(.enabled(if: git(["rev-parse", "--git-dir"]), "needs a git checkout"))
    func whatATryOutWritesIsIgnoredByGit() throws {
        let apns = try SimulateCommand.APNs.parse([])
        let fcm = try SimulateCommand.FCM.parse([])
        let keyFiles = try String(contentsOf: Self.packageDirectory.appendingPathComponent("README.md"), encoding: .utf8)
            .matches(of: /--key-file (\S+)/).map { String($0.output.1) }
        #expect(keyFiles.count >= 2, "the README's sealed phones")
        let written = [apns.certificateOut, fcm.certificateOut, fcm.serviceAccountOut, "AuthKey_TEST.p8", "service-account.json", "simulators.pem", "server.pem"]
            .map { URL(fileURLWithPath: $0).lastPathComponent }
        // What a phone keeps beside its key, as suffixes of the key's path.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let phone = try PhoneKeyFile.loadOrCreate(at: directory.appending("phone.key"))
        let besideKey = [phone.replayStore.fileURL, phone.knownKeys.fileURL, phone.bindingStore.url]
            .map { String($0.lastPathComponent.dropFirst("phone.key".count)) }
        #expect(besideKey.allSatisfy { $0.hasPrefix(".") && $0.count > 1 }, "\(besideKey)")
        for key in keyFiles + ["bob.key"] {
            for path in [key] + besideKey.map({ key + $0 }) {
                #expect(Self.git(["check-ignore", "--quiet", "--no-index", path]), "\(path) is not ignored")
            }
        }
        for path in written {
            #expect(Self.git(["check-ignore", "--quiet", "--no-index", path]), "\(path) is not ignored")
        }
        #expect(!Self.git(["check-ignore", "--quiet", "--no-index", "Sources/RingRelayServer/Resources/openapi.yaml"]))
    }

    /// A port nothing listens on (bound, then closed again): one to find closed, or to listen on.
    static func unusedPort() throws -> Int {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        try #require(bound)
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether `git` succeeds in the repository.
    static func git(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "-C", packageDirectory.path] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
