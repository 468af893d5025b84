import ArgumentParser

/// `ringrelay`: the one executable.
@main
struct RingRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ringrelay",
        abstract: "Self-hosted incoming-call delivery: rings every device of a callee.",
        version: version,
        subcommands: [
            ServeCommand.self, BackupCommand.self, AccountsCommand.self, BindingsCommand.self, CallsCommand.self, PushCommand.self,
            WebhookCommand.self, BenchCommand.self, SimulateCommand.self, PhoneCommand.self,
        ])

    /// What `--version` prints, on `ringrelay` and on every verb: the git commit the binary was
    /// built from (`buildCommit`, written by the CommitStamp plugin), or `unknown` outside a checkout.
    static let version = "ringrelay commit \(buildCommit)"

    /// Runs the verb the arguments name, as ArgumentParser's own `main()` does, except that a
    /// usage error a verb finds while it runs (a missing token, say) shows that verb's usage,
    /// as an error found while parsing does, rather than `ringrelay <subcommand>`'s.
    static func main() async {
        let parsed: any ParsableCommand
        do {
            parsed = try await asyncParseAsRoot()
        } catch {
            exit(withError: error)
        }
        do {
            var command = parsed
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as ValidationError {
            let verb = type(of: parsed)
            let name = (path(to: verb) ?? [verb._commandName]).joined(separator: " ")
            printError("Error: \(error.message)\nUsage: \(usageString(for: verb))\n  See '\(name) --help' for more information.")
            exit(withError: ExitCode.validationFailure)
        } catch {
            exit(withError: error)
        }
    }

    /// The command names from `root` down to `command`: `["ringrelay", "accounts", "create"]`.
    static func path(to command: any ParsableCommand.Type, from root: any ParsableCommand.Type = RingRelayCommand.self) -> [String]? {
        if ObjectIdentifier(root) == ObjectIdentifier(command) { return [root._commandName] }
        for subcommand in root.configuration.subcommands {
            if let rest = path(to: command, from: subcommand) { return [root._commandName] + rest }
        }
        return nil
    }
}
