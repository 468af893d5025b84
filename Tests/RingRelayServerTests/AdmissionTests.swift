import Foundation
import HTTPTypes
import HummingbirdTesting
import RingRelayWire
import RingRelayCore
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import RingRelayServer

/// What admission control reads: the calls' own times, and the event loops' lateness. (Refusals
/// by a real instance behind its database: ``ClusterTests``.)
@Suite struct AdmissionTests {
    /// The standing time is the least of the last second's calls, and only when there were
    /// enough of them: one slow call among quick ones is not a line, a second of slow ones is.
    @Test func theStandingCallTimeIsTheQuickestOfARecentFullSecond() async throws {
        let times = CallTimes()
        for _ in 0..<(CallTimes.enough - 1) { times.record(.milliseconds(400)) }
        #expect(times.standing == .zero, "too few calls to say")
        times.record(.milliseconds(300))
        #expect(times.standing == .milliseconds(300))
        times.record(.milliseconds(2))
        #expect(times.standing == .milliseconds(2), "one quick call: no line stands")
        try await Task.sleep(for: CallTimes.window + .milliseconds(100))
        #expect(times.standing == .zero, "calls older than the window no longer count")
    }

    /// A loop kept busy by a chain of 300 ms tasks never gets to its timer: it is overdue, more
    /// the longer the chain runs; once the loop is free again, it is on time.
    @Test func aLoopKeptBusyRunsLateAndRecovers() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let lag = EventLoopLag(group: group)
        let measuring = Task { try await lag.run() }
        var highest: Duration = .zero
        var failure: (any Error)?
        do {
            try await Task.sleep(for: .milliseconds(400))
            #expect(lag.overdue < .milliseconds(100), "an idle loop: \(lag.overdue)")
            let loop = group.next()
            let busyUntil = ContinuousClock.now + .milliseconds(2500)
            @Sendable func block() {
                guard ContinuousClock.now < busyUntil else { return }
                Thread.sleep(forTimeInterval: 0.3)
                loop.execute(block)
            }
            loop.execute(block)
            while ContinuousClock.now < busyUntil {
                try await Task.sleep(for: .milliseconds(100))
                highest = max(highest, lag.overdue)
            }
            try await Task.sleep(for: .milliseconds(800))
            #expect(lag.overdue < .milliseconds(100), "free again: \(lag.overdue)")
        } catch {
            failure = error
        }
        // The measure stops (and cancels its timers) before its loop goes.
        measuring.cancel()
        _ = await measuring.result
        try await group.shutdownGracefully()
        if let failure { throw failure }
        #expect(highest > .milliseconds(150), "a loop busy in 300 ms stretches: \(highest)")
    }
}

/// The bytes of bodies being read, all requests together, have a budget: past it a request is
/// refused `503 server_busy` before its body is read, and once the bodies held are read (or their
/// connections gone) requests go through again.
@Suite struct BodyBudgetTests {
    @Test func aBudgetRefusesWhatWouldPassItAndFreesWhatWasRead() async throws {
        let budget = BodyBudget(bytes: 100)
        let held = try await budget.reserving(60) { budget.inUse }
        #expect(held == 60)
        #expect(budget.inUse == 0, "given back once read")
        await #expect(throws: RingRelayError.self) {
            try await budget.reserving(60) { try await budget.reserving(60) { () } }
        }
        #expect(budget.inUse == 0, "given back when the read fails too")
    }

    @Test func bodiesHeldOpenFillTheBudgetAndTheNextRequestIsRefusedAtOnce() async throws {
        var configured = try await TestServer.make()
        configured.configuration.bodyBytesInFlight = 3 * 1024 * 1024
        let server = configured
        try await server.withClient(.live) { client in
            let port = try #require(client.port)
            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            // Three batches of 1 MiB announced, a few bytes of each sent: the budget is full.
            var holders: [Int32] = []
            defer { for fd in holders { close(fd) } }
            for _ in 0..<3 {
                let fd = try RawSocket.connected(port: port)
                holders.append(fd)
                let head = "POST /v1/bindings/batch HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer \(key)\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{\"upsert\":["
                _ = head.withCString { write(fd, $0, strlen($0)) }
            }
            let body = #"{"identity":"bob","type":"fcm","token":"t1"}"#
            var refused: TestResponse?
            for _ in 0..<50 {
                let response = try await client.send(.post, "/v1/bindings", token: key, json: body)
                if response.status == .serviceUnavailable {
                    refused = response
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(refused?.errorCode == "server_busy")
            #expect(refused?.headers[.retryAfter] == "1")
            // The held connections go: their reservations with them.
            for fd in holders { close(fd) }
            holders = []
            // (The binding may have gone in before the budget was full: then it is registered again, 200.)
            var taken = false
            for _ in 0..<100 where !taken {
                taken = [.ok, .created].contains(try await client.send(.post, "/v1/bindings", token: key, json: body).status)
                if !taken { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(taken)
        }
    }
}
