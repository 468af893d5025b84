import Foundation
import RingRelayTesting
import Testing

/// `Plugins/CommitStamp/commit-stamp.sh`, which the CommitStamp plugin runs on every build: the
/// commit of the package's own git checkout, else the one the build was given (`RINGRELAY_COMMIT`,
/// the Dockerfile's build argument, since the image is built without `.git`), else `unknown`.
@Suite struct CommitStampTests {
    static let script = DeploymentFilesTests.repository.appendingPathComponent("Plugins/CommitStamp/commit-stamp.sh").path

    /// What the script stamped for `package`, or `nil` when it failed; and what it printed.
    static func stamp(_ package: String, given: String?, in directory: TemporaryDirectory) throws -> (commit: String?, output: String) {
        let output = directory.appending("Generated")
        let run = try Command.run("/bin/sh", [script, package, output] + (given.map { [$0] } ?? []))
        guard run.status == 0 else { return (nil, run.output) }
        let file = try String(contentsOfFile: output + "/BuildCommit.swift", encoding: .utf8)
        let commit = try #require(file.firstMatch(of: /\nlet buildCommit = "(.*)"\n$/)?.output.1, "\(file)")
        return (String(commit), run.output)
    }

    static func git(_ arguments: [String], in directory: String) throws -> String {
        let run = try Command.run(
            "/usr/bin/env", ["git", "-C", directory, "-c", "user.name=test", "-c", "user.email=test@ringrelay.local"] + arguments)
        try #require(run.status == 0, "git \(arguments): \(run.output)")
        return run.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func outsideACheckoutTheGivenCommitIsStamped() throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-stamp")
        defer { directory.remove() }
        let package = directory.appending("package")
        try FileManager.default.createDirectory(atPath: package, withIntermediateDirectories: true)
        #expect(try Self.stamp(package, given: "0a8ef539af3b-dirty", in: directory).commit == "0a8ef539af3b-dirty")
        #expect(try Self.stamp(package, given: "", in: directory).commit == "unknown")
        #expect(try Self.stamp(package, given: nil, in: directory).commit == "unknown")
    }

    /// A checkout's own commit wins over a given one; a package unpacked inside some other
    /// repository takes the given commit, never that repository's.
    @Test func aCheckoutsOwnCommitWinsAndAnEnclosingOnesDoesNot() throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-stamp")
        defer { directory.remove() }
        let checkout = directory.appending("checkout")
        try FileManager.default.createDirectory(atPath: checkout + "/unpacked", withIntermediateDirectories: true)
        _ = try Self.git(["init", "--quiet"], in: checkout)
        try Data("x".utf8).write(to: URL(fileURLWithPath: checkout + "/unpacked/file"))
        _ = try Self.git(["add", "."], in: checkout)
        _ = try Self.git(["commit", "--quiet", "-m", "one"], in: checkout)
        let head = try Self.git(["rev-parse", "--short=12", "HEAD"], in: checkout)

        #expect(try Self.stamp(checkout, given: "given", in: directory).commit == head)
        #expect(try Self.stamp(checkout + "/unpacked", given: "given", in: directory).commit == "given")
        try Data("changed".utf8).write(to: URL(fileURLWithPath: checkout + "/unpacked/file"))
        #expect(try Self.stamp(checkout, given: nil, in: directory).commit == head + "-dirty")
    }

    /// The commit ends up in a Swift string literal: anything that could break out of it fails
    /// the build with a message instead.
    @Test(arguments: [#"abc"; fatalError(); let x = ""#, "abc def", #"abc\u{0}"#, "$(id)"])
    func aGivenCommitThatIsNotACommitIsRefused(_ given: String) throws {
        let directory = try TemporaryDirectory(prefix: "ringrelay-stamp")
        defer { directory.remove() }
        let package = directory.appending("package")
        try FileManager.default.createDirectory(atPath: package, withIntermediateDirectories: true)
        let stamped = try Self.stamp(package, given: given, in: directory)
        #expect(stamped.commit == nil)
        #expect(stamped.output.contains("RINGRELAY_COMMIT must be a commit"), "\(stamped.output)")
        #expect(!FileManager.default.fileExists(atPath: directory.appending("Generated/BuildCommit.swift")))
    }
}
