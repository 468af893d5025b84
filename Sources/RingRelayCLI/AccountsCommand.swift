import ArgumentParser
import Foundation
import NIOHTTP1
import RingRelayWire

/// `ringrelay accounts …`: manage accounts on a running server with the admin token.
struct AccountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts", abstract: "Create, list and delete accounts (admin token).",
        subcommands: [Create.self, List.self, Delete.self, Limits.self])

    static let tokenVariables = ["RINGRELAY_ADMIN_TOKEN", "RINGRELAY_TOKEN"]

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an account and print its first API key (shown once).")
        @OptionGroup var options: ServerOptions
        @Option(help: "Unique account name: letters, digits, '-', '_', '.'.") var name: String

        func run() async throws {
            let client = try options.client(tokenVariables: AccountsCommand.tokenVariables)
            try await reportingAPIErrors {
                let (created, data) = try await client.send(.POST, "/v1/accounts", body: CreateAccountRequest(name: name), as: CreatedAccount.self)
                if options.json { return printJSON(data) }
                print("Created account \(created.name) (\(created.id)).")
                print("API key (shown once, store it now): \(created.apiKey)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List accounts.")
        @OptionGroup var options: ServerOptions

        func run() async throws {
            let client = try options.client(tokenVariables: AccountsCommand.tokenVariables)
            try await reportingAPIErrors {
                let (list, data) = try await client.send(.GET, "/v1/accounts", as: AccountList.self)
                if options.json { return printJSON(data) }
                printTable(["ID", "NAME", "CREATED"], list.data.map { [$0.id, $0.name, $0.createdAt.formatted(.iso8601)] })
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an account with all its keys, credentials and bindings.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "The account id (acc_…).") var id: String

        func run() async throws {
            let client = try options.client(tokenVariables: AccountsCommand.tokenVariables)
            try await reportingAPIErrors {
                _ = try await client.send(.DELETE, "/v1/accounts/\(id.urlEncoded)")
                if options.json { return printJSON(Data(#"{"deleted":"\#(id)"}"#.utf8)) }
                print("Deleted account \(id).")
            }
        }
    }

    struct Limits: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show or set one account's own rate budget and provider ring time, in place of the server's.",
            discussion: "Without options, shows them. With any, replaces them: an option left out goes back to the server's setting.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "The account id (acc_…).") var id: String
        @Option(help: "Requests per second of each of the account's budgets (webhooks, calls, binding writes); 0 for no limit.")
        var rateLimit: Double?
        @Option(help: "The largest burst of each budget.") var rateLimitBurst: Double?
        @Option(help: "How long the account's provider calls ring, in seconds (5-180).") var ringTimeout: Int?
        @Flag(help: "Go back to the server's settings for all three.") var clear = false

        func run() async throws {
            let client = try options.client(tokenVariables: AccountsCommand.tokenVariables)
            let path = "/v1/accounts/\(id.urlEncoded)/limits"
            try await reportingAPIErrors {
                let setting = clear || rateLimit != nil || rateLimitBurst != nil || ringTimeout != nil
                let (limits, data) =
                    setting
                    ? try await client.send(
                        .PUT, path, body: AccountLimitsBody(rateLimit: rateLimit, rateLimitBurst: rateLimitBurst, ringTimeoutSeconds: ringTimeout),
                        as: AccountLimitsBody.self)
                    : try await client.send(.GET, path, as: AccountLimitsBody.self)
                if options.json { return printJSON(data) }
                func shown(_ value: (some CustomStringConvertible)?) -> String { value.map(\.description) ?? "the server's" }
                print("rate limit        \(shown(limits.rateLimit))")
                print("rate limit burst  \(shown(limits.rateLimitBurst))")
                print("ring timeout (s)  \(shown(limits.ringTimeoutSeconds))")
            }
        }
    }
}
