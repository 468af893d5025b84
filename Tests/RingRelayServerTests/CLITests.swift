import ArgumentParser
import Foundation
import RingRelayTesting
import Testing

@testable import RingRelayCLI

/// The `ringrelay` executable's own behaviour, whatever the verb.
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
