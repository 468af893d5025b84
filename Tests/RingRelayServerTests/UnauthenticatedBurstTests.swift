import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RingRelayCore
import RingRelayStore
import RingRelayTesting
import Synchronization
import Testing

@testable import RingRelayServer

/// Strangers posting to webhook URLs: what it costs the server (issue 16 item 2).
@Suite(.serialized) struct UnauthenticatedBurstTests {
    /// Lookups of accounts that do not exist are cached with a bound, whatever the burst.
    @Test func theCredentialCacheNeverHoldsMoreThanItsCapacity() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await SQLiteStore.open(path: directory.appending("ringrelay.sqlite"), logger: TestLogging.logger("test"))
        let cache = CredentialCache(store: store, capacity: 100)
        for _ in 0..<1_000 {
            #expect(try await cache.credential(.twilio, accountID: ResourceID.make(ResourceID.account)) == nil)
        }
        #expect(cache.count <= 100)
        try await store.close()
    }

    /// A burst of unsigned webhooks to random paths (16 KB of hex, and account-shaped ids that do not
    /// exist) is refused 403 and leaves the log with a handful of lines, not one a request.
    @Test func anUnsignedBurstIsRefusedAndBarelyLogged() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try ServerProcess(
            ["serve", "--port", "0", "--data-dir", "data", "--admin-token", "burst-admin-token-0123456789", "--log-level", "info"],
            directory: directory.path)
        let url = try await server.waitUntilListening()
        try await Task.sleep(for: .milliseconds(200))
        let linesBefore = server.stderr.split(separator: "\n").count

        let statuses = ServerProcess.Collected()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in 0..<125 {
                        let path =
                            index.isMultiple(of: 2)
                            ? (0..<8192).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
                            : ResourceID.make(ResourceID.account)
                        let provider = (worker + index).isMultiple(of: 3) ? "webex" : "twilio"
                        var request = HTTPClientRequest(url: "\(url)/v1/webhooks/\(provider)/\(path)")
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.headers.add(name: "X-Twilio-Signature", value: "bm90IGEgc2lnbmF0dXJl")
                        request.body = .bytes(ByteBuffer(string: #"{"twi_message_id":"x"}"#))
                        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
                        _ = try await response.body.collect(upTo: 1 << 16)
                        statuses.text.withLock { $0 += "\(response.status.code)\n" }
                    }
                }
            }
            try await group.waitForAll()
        }
        let answered = statuses.text.withLock { $0 }.split(separator: "\n")
        #expect(answered.count == 1_000)
        #expect(answered.allSatisfy { $0 == "403" }, "\(Set(answered))")
        let logged = server.stderr.split(separator: "\n").count - linesBefore
        #expect(logged < 20, "the burst wrote \(logged) log lines")
        server.signal(SIGTERM)
        #expect(try await server.waitForExit() == 0)
    }
}
