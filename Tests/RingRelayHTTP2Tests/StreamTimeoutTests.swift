import NIOCore
import NIOSSL
import RingRelayTesting
import Testing

@testable import RingRelayHTTP2

/// Stream timeouts, against the strict Python `h2` server (an HTTP/2 server RingRelay did not
/// write) answering every request seconds late: a stream past its timeout is reset at once, its
/// slot is free again as soon as NIO has closed it, and the one timer a connection keeps for all
/// its streams serves a later stream with an earlier deadline.
@Suite struct StreamTimeoutTests {
    /// With the server's limit at one stream (no answer has lifted it), three requests can only
    /// run one after another: they all time out well before the server's first answer would have
    /// freed the slot, so each reset gave it back.
    @Test func aTimedOutStreamIsResetAndGivesItsSlotBack() async throws {
        let server = try await InteropServer.strict(scenario: "slow", arguments: ["--delay-ms", "8000"])
        defer { server.stop() }
        let pool = try Self.pool(for: server)
        let started = ContinuousClock.now
        let failures = await withTaskGroup(of: HTTP2Failure.Kind?.self) { group in
            for _ in 0..<3 {
                group.addTask { await Self.failure(of: Self.otherRequest, on: pool, timeout: .milliseconds(300)) }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - started
        await pool.shutdown()
        #expect(failures == [.timedOut, .timedOut, .timedOut])
        #expect(elapsed < .seconds(6), "\(elapsed): the slots were freed by the server's answers, not by the resets")
        let events = server.events()
        #expect(events.filter { $0.event == "client_reset" }.count == 3, "\(events.map(\.event))")
        #expect(events.filter { $0.event == "violation" }.isEmpty)
    }

    /// Two streams open together, the second with the earlier deadline: it times out at its own
    /// deadline, not at the first one's, where the connection's timer was armed.
    @Test func aLaterStreamWithAnEarlierDeadlineTimesOutOnTime() async throws {
        let server = try await InteropServer.strict(scenario: "slow", arguments: ["--delay-ms", "8000", "--initial-limit", "4"])
        defer { server.stop() }
        let pool = try Self.pool(for: server)
        let started = ContinuousClock.now
        async let long = Self.timedFailure(on: pool, timeout: .seconds(4), since: started)
        try await Task.sleep(for: .milliseconds(100))
        async let short = Self.timedFailure(on: pool, timeout: .milliseconds(300), since: started)
        let (first, second) = await (long, short)
        await pool.shutdown()
        #expect(first.kind == .timedOut)
        #expect(second.kind == .timedOut)
        // On time, the short one ends ~0.4 s in; at the long one's deadline, 4 s in.
        #expect(second.elapsed + .seconds(2) < first.elapsed, "short \(second.elapsed), long \(first.elapsed)")
        #expect(server.events().filter { $0.event == "violation" }.isEmpty)
    }

    private static func pool(for server: InteropServer) throws -> HTTP2ConnectionPool {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(server.caFile)]
        return HTTP2ConnectionPool(endpoint: try HTTP2Endpoint(url: server.url, tls: tls))
    }

    private static func failure(of request: HTTP2Request, on pool: HTTP2ConnectionPool, timeout: TimeAmount) async -> HTTP2Failure.Kind? {
        do {
            _ = try await pool.send(request, timeout: timeout, deadline: .now() + .seconds(20))
            return nil
        } catch {
            return error.kind
        }
    }

    private static func timedFailure(
        on pool: HTTP2ConnectionPool, timeout: TimeAmount, since start: ContinuousClock.Instant
    ) async -> (kind: HTTP2Failure.Kind?, elapsed: Duration) {
        let kind = await failure(of: otherRequest, on: pool, timeout: timeout)
        return (kind, ContinuousClock.now - start)
    }

    /// A path the server answers `404` to, late.
    private static let otherRequest = HTTP2Request(path: "/other", headers: [], body: Array("{}".utf8))
}
