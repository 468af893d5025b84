import Foundation
import PackagePlugin

/// Writes the git commit the executable is built from into a Swift file, for `--version`.
///
/// A prebuild command, so it runs on every `swift build` without declaring inputs (a commit
/// changes `.git` in ways no input list captures). It runs `commit-stamp.sh` beside this file
/// with `/bin/sh`, which every supported build host has; the script writes `BuildCommit.swift`
/// only when its text changes, so an unchanged commit recompiles nothing.
///
/// Outside a git checkout (a source tarball, a Docker build context without `.git`) the commit
/// is `RINGRELAY_COMMIT` from the build's environment (the Dockerfile's build argument), else
/// `unknown`. A prebuild command gets no environment of its own, so the value is handed to the
/// script as an argument.
@main
struct CommitStamp: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "Generated")
        let script = context.package.directoryURL.appending(path: "Plugins/CommitStamp/commit-stamp.sh")
        let given = ProcessInfo.processInfo.environment["RINGRELAY_COMMIT"] ?? ""
        return [
            .prebuildCommand(
                displayName: "Stamping the git commit into \(target.name)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: [script.path, context.package.directoryURL.path, output.path, given],
                outputFilesDirectory: output)
        ]
    }
}
