import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayTesting
import RingRelayWire
import Synchronization
import Testing

@testable import RingRelayServer

/// Every device of every party hears exactly one ending per call (`call.cancelled`, `call.missed`,
/// `call.answered_elsewhere`, `call.declined_elsewhere`, `call.rejected` or `call.ended`) and
/// nothing after it; `call.ended` reaches only the devices in the call. Checked on real WebSocket
/// clients under races: several devices accepting at once over REST and the socket, a cancel or a
/// reject racing an accept, a second call during a call, and 50 calls with random commands.
@Suite struct TerminalEventTests {
    static let terminal: Set<CallEventType> = [.cancelled, .missed, .answeredElsewhere, .declinedElsewhere, .rejected, .ended]

    /// Alice (a1) calls Bob (b1…b5); Carol (c1) calls Bob too.
    struct World {
        let client: any TestClientProtocol
        /// The account's API key, which sees every call.
        let key: String
        let tokens: [String: String]
        let devices: [String: LiveDevice]

        func call(from caller: String, to callee: String = "bob") async throws -> CallResource {
            let response = try await client.send(.post, "/v1/calls", token: tokens[caller], json: #"{"to":"\#(callee)"}"#)
            #expect(response.status == .created, "\(String(buffer: response.body))")
            return try response.decode(CallResource.self)
        }

        /// A command over REST or over the device's live connection; returns whether it won
        /// (REST: 200; socket: no error frame for the call within the wait).
        @discardableResult
        func command(_ command: String, _ callID: String, by device: String, overSocket: Bool) async throws -> Bool {
            if overSocket, let live = devices[device] {
                let frame: DeviceFrame =
                    switch command {
                    case "accept": .accept(callId: callID)
                    case "reject": .reject(callId: callID)
                    case "cancel": .cancel(callId: callID)
                    default: .end(callId: callID)
                    }
                try await live.send(frame)
                return true
            }
            return try await client.send(.post, "/v1/calls/\(callID)/\(command)", token: tokens[device]).status == .ok
        }

        func record(_ callID: String) async throws -> CallResource {
            try await client.send(.get, "/v1/calls/\(callID)", token: key).decode(CallResource.self)
        }

        /// Ends whatever is still live of `call`: cancels a ring, hangs up an accepted call.
        func finish(_ callID: String) async throws {
            let record = try await record(callID)
            if record.state == "ringing" { _ = try await command("cancel", callID, by: record.from == "carol" ? "c1" : "a1", overSocket: false) }
            if record.state == "accepted" { _ = try await command("end", callID, by: record.from == "carol" ? "c1" : "a1", overSocket: false) }
        }

        /// Checks the rule for `calls` on every device; `nil` when it holds, else what broke.
        func violations(_ calls: [String]) async throws -> [String] {
            var broken: [String] = []
            for callID in calls {
                let record = try await record(callID)
                for (name, device) in devices.sorted(by: { $0.key < $1.key }) {
                    let identity = name.hasPrefix("a") ? "alice" : name.hasPrefix("b") ? "bob" : "carol"
                    guard identity == record.from || identity == record.to else { continue }
                    let events = device.events.filter { $0.callId == callID }
                    let endings = events.filter { Self.isTerminal($0.type) }
                    if endings.count != 1 {
                        broken.append("\(name) \(callID): \(endings.count) endings \(events.map(\.type.rawValue))")
                    } else if let last = events.last, !Self.isTerminal(last.type) {
                        broken.append("\(name) \(callID): \(last.type.rawValue) after its ending \(events.map(\.type.rawValue))")
                    }
                    if endings.contains(where: { $0.type == .ended }), identity == record.to, record.answeredBy != name {
                        broken.append("\(name) \(callID): call.ended but it was not in the call (answered by \(record.answeredBy ?? "-"))")
                    }
                }
            }
            return broken
        }

        static func isTerminal(_ type: CallEventType) -> Bool { TerminalEventTests.terminal.contains(type) }
    }

    static func withWorld(_ body: @Sendable (World) async throws -> Void) async throws {
        let devices: KeyValuePairs<String, String> = ["a1": "alice", "c1": "carol", "b1": "bob", "b2": "bob", "b3": "bob", "b4": "bob", "b5": "bob"]
        try await ConnectedDevices.with(devices) { world in
            try await body(World(client: world.client, key: world.key, tokens: world.tokens, devices: world.devices))
        }
    }

    /// Waits until every party's devices have their ending for each call, then checks the rule
    /// (and that nothing more arrives).
    static func expectOneEndingEach(_ world: World, _ calls: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        _ = await eventually(timeout: .seconds(20)) { ((try? await world.violations(calls)) ?? ["?"]).isEmpty }
        try await Task.sleep(for: .milliseconds(300))  // anything late would arrive now
        let broken = try await world.violations(calls)
        let count = broken.count
        #expect(count == 0, "violations: \(broken.prefix(6))", sourceLocation: sourceLocation)
    }

    @Test func simultaneousAcceptsOverRESTAndSocketHaveOneWinnerAndOneEndingPerDevice() async throws {
        try await Self.withWorld { world in
            var calls: [String] = []
            for round in 0..<4 {
                let call = try await world.call(from: "a1")
                calls.append(call.id)
                let accepting = Array(["b1", "b2", "b3", "b4", "b5"].prefix(2 + round))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, device) in accepting.enumerated() {
                        group.addTask { try await world.command("accept", call.id, by: device, overSocket: index % 2 == 1) }
                    }
                    try await group.waitForAll()
                }
                #expect(await eventually { (try? await world.record(call.id).state) == "accepted" })
                try await world.finish(call.id)
            }
            try await Self.expectOneEndingEach(world, calls)
        }
    }

    @Test func cancelOrRejectRacingAnAcceptEndsEachDeviceOnce() async throws {
        try await Self.withWorld { world in
            var calls: [String] = []
            for round in 0..<6 {
                let call = try await world.call(from: "a1")
                calls.append(call.id)
                let (racer, device) = round % 2 == 0 ? ("cancel", "a1") : ("reject", "b2")
                async let accepted = world.command("accept", call.id, by: "b1", overSocket: round % 3 == 0)
                async let raced = world.command(racer, call.id, by: device, overSocket: round % 3 == 1)
                _ = try await (accepted, raced)
                try await world.finish(call.id)
            }
            try await Self.expectOneEndingEach(world, calls)
        }
    }

    @Test func aSecondCallDuringACallEndsOnItsOwn() async throws {
        try await Self.withWorld { world in
            let first = try await world.call(from: "a1")
            try await world.command("accept", first.id, by: "b1", overSocket: false)
            let second = try await world.call(from: "c1")
            let ring = try #require(await eventuallyValue { world.devices["b2"]?.events.first { $0.callId == second.id } })
            #expect(ring.calleeBusy == true)
            try await world.command("reject", second.id, by: "b2", overSocket: true)
            try await world.finish(second.id)
            try await world.command("end", first.id, by: "b1", overSocket: false)
            try await Self.expectOneEndingEach(world, [first.id, second.id])
        }
    }

    @Test func fiftyCallsWithRandomCommandsEndEachDeviceOnce() async throws {
        try await Self.withWorld { world in
            var random = SeededGenerator(seed: 0x5EED_CA11)
            var calls: [String] = []
            for _ in 0..<5 {
                var plans: [(String, [(String, String, Bool)])] = []
                for _ in 0..<10 {
                    let caller = random.next() % 3 == 0 ? "c1" : "a1"
                    let call = try await world.call(from: caller)
                    calls.append(call.id)
                    // Two or three commands from random parties at once, over either way in.
                    let commands = (0..<(2 + Int(random.next() % 2))).map { _ -> (String, String, Bool) in
                        let bob = "b\(1 + Int(random.next() % 5))"
                        let options = [("accept", bob), ("reject", bob), ("cancel", caller), ("end", caller), ("end", bob), ("accept", bob)]
                        let (command, device) = options[Int(random.next() % UInt64(options.count))]
                        return (command, device, random.next() % 2 == 0)
                    }
                    plans.append((call.id, commands))
                }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (callID, commands) in plans {
                        for (command, device, overSocket) in commands {
                            group.addTask { try await world.command(command, callID, by: device, overSocket: overSocket) }
                        }
                    }
                    try await group.waitForAll()
                }
                try await Task.sleep(for: .milliseconds(100))
                for (callID, _) in plans { try await world.finish(callID) }
            }
            try await Self.expectOneEndingEach(world, calls)
        }
    }
}

/// Polls `produce` until it gives a value or `timeout` passes.
func eventuallyValue<T: Sendable>(timeout: Duration = .seconds(20), _ produce: @Sendable () async -> T?) async -> T? {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if let value = await produce() { return value }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await produce()
}
