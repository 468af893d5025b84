import NIOCore
import NIOPosix
import NIOSSL
import RingRelayTesting
import Testing

@testable import RingRelayHTTP2

/// A request sent from an event loop goes over a connection of that loop, against the strict
/// Python `h2` server: the first connection opens where the first request came from; a request
/// from the other loop goes over it meanwhile and has a connection opened on its own loop; from
/// then on each loop's requests keep to their own connection, and no third opens. (The server
/// allows 100 streams from the start: at APNs' first limit of one, a request sent right after the
/// answer before it may find that stream not yet closed, and rightly go over the other connection.)
@Suite struct HomeConnectionTests {
    @TaskLocal static var home: (any EventLoop)?

    @Test func requestsGoOverTheConnectionOfTheirOwnLoop() async throws {
        let server = try await InteropServer.strict(scenario: "apns", arguments: ["--initial-limit", "100"])
        defer { server.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let loops = Array(group.makeIterator())
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(server.caFile)]
        let pool = HTTP2ConnectionPool(endpoint: try HTTP2Endpoint(url: server.url, tls: tls), group: group, currentLoop: { Self.home })

        try await Self.$home.withValue(loops[0]) { try await Self.send("first", on: pool) }
        // The second loop has no connection yet: its request goes over the first loop's, and one opens for it.
        try await Self.$home.withValue(loops[1]) { try await Self.send("other-0", on: pool) }
        let deadline = ContinuousClock.now + .seconds(10)
        // Ready once the client has acknowledged the server's SETTINGS (the pool counts it ready as it reads them).
        while server.events().filter({ $0.event == "settings_acked" }).count < 2, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Self.$home.withValue(loops[1]) {
            for index in 1...5 { try await Self.send("other-\(index)", on: pool) }
        }
        try await Self.$home.withValue(loops[0]) {
            for index in 1...5 { try await Self.send("first-\(index)", on: pool) }
        }
        await pool.shutdown()
        try await group.shutdownGracefully()

        let events = server.events()
        #expect(events.filter { $0.event == "connection" }.count == 2, "\(events.map(\.event))")
        let requests = events.filter { $0.event == "request" }
        func connections(_ prefix: String) -> Set<Int> {
            Set(requests.filter { $0.apnsID?.hasPrefix(prefix) == true && $0.apnsID != "other-0" }.compactMap(\.connection))
        }
        let first = connections("first")
        let other = connections("other")
        #expect(first.count == 1 && other.count == 1 && first != other, "first loop: \(first), other loop: \(other)")
        #expect(requests.first { $0.apnsID == "other-0" }?.connection == first.first, "sent before its loop had a connection")
        #expect(events.filter { $0.event == "violation" }.isEmpty)
    }

    /// Sends one request tagged `tag` (as its `apns-id`, which the server logs) and expects an answer.
    private static func send(_ tag: String, on pool: HTTP2ConnectionPool) async throws {
        let request = HTTP2Request(path: "/other", headers: [("apns-id", tag)], body: Array("{}".utf8))
        let response = try await pool.send(request, timeout: .seconds(10), deadline: .now() + .seconds(10))
        #expect(response.status == 404)
    }
}
