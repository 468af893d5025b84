import ArgumentParser
import Foundation
import NIOHTTP1
import RingRelayWire

/// `ringrelay calls …`: read an account's call history with its API key.
struct CallsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calls", abstract: "Read the call history (account API key).", subcommands: [List.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List calls, newest first: one page, or every page with --all.",
            discussion: "When more calls follow, the last line names the --cursor for the next page (pass the same filters).")
        @OptionGroup var options: ServerOptions
        @Option(help: "Only calls this identity took part in (as callee, or as the caller of a native call).") var identity: String?
        @Option(help: "Only incoming or outgoing calls of --identity.") var direction: String?
        @Option(help: "Only calls in this state: ringing, accepted, rejected, cancelled, ended, missed or unreachable; several separated by commas.")
        var state: String?
        @Option(help: "Only calls created at or after this RFC 3339 time (2026-05-01T08:00:00Z).") var since: String?
        @Option(help: "Only calls created before this RFC 3339 time.") var until: String?
        @Option(help: "Page size (1–100).") var limit: Int = 50
        @Option(help: "Continue after a page: its nextCursor.") var cursor: String?
        @Flag(help: "Follow every page.") var all = false

        func run() async throws {
            let client = try options.client(tokenVariables: BindingsCommand.tokenVariables)
            try await reportingAPIErrors {
                var calls: [CallResource] = []
                var cursor = self.cursor
                repeat {
                    var query = ["limit=\(limit)"]
                    if let identity { query.append("identity=\(identity.urlEncoded)") }
                    if let direction { query.append("direction=\(direction.urlEncoded)") }
                    if let state { query.append("state=\(state.urlEncoded)") }
                    if let since { query.append("since=\(since.urlEncoded)") }
                    if let until { query.append("until=\(until.urlEncoded)") }
                    if let cursor { query.append("cursor=\(cursor.urlEncoded)") }
                    let (page, data) = try await client.send(.GET, "/v1/calls?" + query.joined(separator: "&"), as: CallList.self)
                    if !all, options.json { return printJSON(data) }
                    calls += page.data
                    cursor = page.nextCursor
                } while all && cursor != nil
                if options.json {
                    return printJSON(try JSONEncoder.ringRelay.encode(CallList(data: calls, nextCursor: nil)))
                }
                printTable(["ID", "CREATED", "SOURCE", "FROM", "TO", "STATE", "ANSWERED BY", "DURATION", "END"], calls.map(Self.row))
                if let cursor {
                    print("More calls: --cursor \(cursor)")
                }
            }
        }

        /// One call as a table row: `-` where there is nothing to show.
        static func row(_ call: CallResource) -> [String] {
            let end = [call.endReason, call.endedBy.map { "by \($0)" }].compactMap(\.self).joined(separator: " ")
            return [
                call.id, call.createdAt.formatted(.iso8601), call.source, call.from ?? "-", call.to, call.state, call.answeredBy ?? "-",
                call.durationSeconds.map { "\($0) s" } ?? "-", end.isEmpty ? "-" : end,
            ]
        }
    }
}
