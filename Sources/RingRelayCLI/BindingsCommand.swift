import ArgumentParser
import Foundation
import NIOHTTP1
import RingRelayWire

/// `ringrelay bindings …`: inspect and edit an account's bindings with its API key.
struct BindingsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bindings", abstract: "List, add and delete device bindings (account API key).",
        subcommands: [List.self, Add.self, Delete.self])

    static let tokenVariables = ["RINGRELAY_TOKEN"]

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List bindings, newest last; follows every page.")
        @OptionGroup var options: ServerOptions
        @Option(help: "Only this identity.") var identity: String?
        @Option(help: "Only this type: apns_voip, apns_alert, fcm or live.") var type: String?
        @Option(help: "Only this status: active or invalid.") var status: String?
        @Option(help: "Page size (1–500).") var limit: Int = 100

        func run() async throws {
            let client = try options.client(tokenVariables: BindingsCommand.tokenVariables)
            try await reportingAPIErrors {
                var all: [BindingResource] = []
                var cursor: String?
                repeat {
                    var query = ["limit=\(limit)"]
                    if let identity { query.append("identity=\(identity.urlEncoded)") }
                    if let type { query.append("type=\(type.urlEncoded)") }
                    if let status { query.append("status=\(status.urlEncoded)") }
                    if let cursor { query.append("cursor=\(cursor.urlEncoded)") }
                    let (page, _) = try await client.send(.GET, "/v1/bindings?" + query.joined(separator: "&"), as: BindingList.self)
                    all += page.data
                    cursor = page.nextCursor
                } while cursor != nil
                if options.json {
                    return printJSON(try JSONEncoder.ringRelay.encode(BindingList(data: all, nextCursor: nil)))
                }
                printTable(
                    ["ID", "IDENTITY", "TYPE", "ENV", "STATUS", "TOKEN"],
                    all.map { [$0.id, $0.identity, $0.type, $0.environment ?? "-", $0.status, String($0.token.prefix(12)) + "…"] })
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register a device token for an identity.")
        @OptionGroup var options: ServerOptions
        @Option(help: "The identity (user) the device belongs to.") var identity: String
        @Option(help: "apns_voip, apns_alert, fcm or live.") var type: String
        @Option(name: .customLong("push-token"), help: "The device push token (hex for APNs).") var pushToken: String
        @Option(help: "production or sandbox (APNs only).") var environment: String?
        @Option(help: "The app's device id.") var deviceId: String?

        func run() async throws {
            let client = try options.client(tokenVariables: BindingsCommand.tokenVariables)
            try await reportingAPIErrors {
                let request = BindingRequest(identity: identity, type: type, token: pushToken, environment: environment, deviceId: deviceId)
                let (binding, data) = try await client.send(.POST, "/v1/bindings", body: request, as: BindingResource.self)
                if options.json { return printJSON(data) }
                print("Binding \(binding.id): \(binding.identity) \(binding.type) \(binding.status).")
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete one binding by id, or every binding of an identity.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "The binding id (bnd_…).") var id: String?
        @Option(help: "Delete every binding of this identity instead.") var identity: String?

        func validate() throws {
            guard (id == nil) != (identity == nil) else {
                throw ValidationError("Pass either a binding id or --identity.")
            }
        }

        func run() async throws {
            let client = try options.client(tokenVariables: BindingsCommand.tokenVariables)
            try await reportingAPIErrors {
                if let id {
                    _ = try await client.send(.DELETE, "/v1/bindings/\(id.urlEncoded)")
                    if options.json { return printJSON(Data(#"{"deleted":1}"#.utf8)) }
                    print("Deleted binding \(id).")
                } else if let identity {
                    let (result, data) = try await client.send(.DELETE, "/v1/bindings?identity=\(identity.urlEncoded)", as: DeletedBindings.self)
                    if options.json { return printJSON(data) }
                    print("Deleted \(result.deleted) binding(s) of \(identity).")
                }
            }
        }
    }
}
