import ArgumentParser
import Foundation
import NIOHTTP1
import RingRelayWire

/// `ringrelay push …`: send pushes by hand.
struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push", abstract: "Send pushes by hand (account API key).", subcommands: [Test.self])

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one real test push to a binding and show what the push service answered.",
            discussion: "Exits with status 0 when the push was delivered, 2 when the push service refused it.")
        @OptionGroup var options: ServerOptions
        @Option(help: "The binding id (bnd_…).") var binding: String

        func run() async throws {
            let client = try options.client(tokenVariables: BindingsCommand.tokenVariables)
            var delivered = false
            try await reportingAPIErrors {
                let (result, data) = try await client.send(
                    .POST, "/v1/bindings/\(binding.urlEncoded)/test", body: Optional<String>.none, as: TestPushResult.self)
                delivered = result.outcome == "delivered"
                if options.json { return printJSON(data) }
                let status = result.status.map(String.init) ?? "no answer"
                print("\(result.outcome): \(result.channel) \(result.kind) push, status \(status)\(result.reason.map { ", reason \($0)" } ?? "")")
                print("push id \(result.pushId ?? "-"), \(result.latencyMs) ms, \(result.attempts) attempt(s); binding is \(result.binding.status)")
            }
            if !delivered { throw ExitCode(2) }
        }
    }
}
