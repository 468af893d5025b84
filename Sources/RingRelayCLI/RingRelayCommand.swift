import ArgumentParser

/// `ringrelay`: the one executable.
@main
struct RingRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ringrelay",
        abstract: "Self-hosted incoming-call delivery: rings every device of a callee.",
        version: version,
        subcommands: [ServeCommand.self, BackupCommand.self, AccountsCommand.self, BindingsCommand.self, CallsCommand.self, PushCommand.self, BenchCommand.self, SimulateCommand.self, PhoneCommand.self])

    /// What `--version` prints, on `ringrelay` and on every verb: the git commit the binary was
    /// built from (`buildCommit`, written by the CommitStamp plugin), or `unknown` outside a checkout.
    static let version = "ringrelay commit \(buildCommit)"

}
