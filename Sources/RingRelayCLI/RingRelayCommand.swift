import ArgumentParser

/// `ringrelay`: the one executable.
@main
struct RingRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ringrelay",
        abstract: "Self-hosted incoming-call delivery: rings every device of a callee.",
        subcommands: [ServeCommand.self, BackupCommand.self, AccountsCommand.self, BindingsCommand.self, CallsCommand.self, PushCommand.self, BenchCommand.self, SimulateCommand.self, PhoneCommand.self])
}
