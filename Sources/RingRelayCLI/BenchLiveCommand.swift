import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import NIOHTTP1
import RingRelayCore
import RingRelayTesting
import RingRelayWire
import Synchronization

extension BenchCommand {
    /// `ringrelay bench live`: idle live connections held by a real server process, then native
    /// calls rung over them, timed from the POST to the device reading the event.
    struct Live: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "live",
            abstract: "Idle live connections to a `ringrelay serve` child, then native calls rung over them at a fixed rate.",
            discussion: """
                Starts `ringrelay serve` (this same executable) as a child on an empty data directory, mints one access \
                token per device and connects --devices WebSockets from --processes children of this executable, at \
                most --connect-concurrency connects in flight. With every device connected and idle for --settle seconds, \
                it reads the server's RSS. Then it starts calls (POST /v1/calls) at --rate for --duration seconds (open \
                loop), each to a random device, which acks its call.incoming event and rejects the call. Reports the idle \
                RSS per connection, calls/s, ring-to-receipt (POST sent → event read by the device, on the wall clock) \
                and response percentiles, and the server's peak RSS. One process holds at most as many sockets as its \
                hard open-file limit (ulimit -Hn), which caps --devices. Build with -c release for meaningful figures.

                With --instances N (and --database-url, or RINGRELAY_DATABASE_URL), N servers share one PostgreSQL \
                database: device i connects to instance i mod N, call k is posted to instance k mod N (to the next one if \
                that one is down, as a balancer would), and rings are reported apart for the same and another instance. \
                --kill-one-after S kills the last instance with SIGKILL S seconds into the calls: its devices reconnect to \
                the others, and every call is then read back until it has reached a final state.
                """)

        @Option(help: "Devices, one live connection each.") var devices = 20_000
        @Option(help: "Calls per second.") var rate = 500
        @Option(help: "Seconds of calls.") var duration = 60
        @Option(help: "Child processes holding the connections. (default: one per 9,000 devices)") var processes: Int?
        @Option(help: "Connects in flight at once, over all processes.") var connectConcurrency = 200
        @Option(help: "Seconds all devices stay idle before the server's RSS is read.") var settle = 5
        @Option(
            help: ArgumentHelp(
                "Every other call sealed, with this many boxes (0: none).",
                discussion: "Each device gets as many bindings with a public key; the sealed calls carry one box for each, and the plain and sealed rings are reported apart."))
        var sealedBoxes = 0
        @Option(help: "Server instances sharing one PostgreSQL database (needs --database-url).") var instances = 1
        @Option(help: "PostgreSQL database for the instances, postgres://… (default: RINGRELAY_DATABASE_URL; a secret: prefer the environment).")
        var databaseUrl: String?
        @Option(help: "Seconds into the calls to kill the last instance with SIGKILL (needs --instances 2 or more).") var killOneAfter: Int?
        @Flag(help: "Print the result as JSON.") var json = false

        /// Files the server keeps open besides its connections (database, listener, pipes, …).
        static let serverReserve = 50

        private var processCount: Int { processes ?? (devices + 8_999) / 9_000 }

        func validate() throws {
            guard devices > 0, rate > 0, duration > 0, connectConcurrency > 0, settle >= 0 else {
                throw ValidationError("--devices, --rate, --duration and --connect-concurrency must be positive, --settle not negative.")
            }
            guard (1...devices).contains(processCount) else { throw ValidationError("--processes must be 1…\(devices).") }
            guard (0...20).contains(sealedBoxes) else { throw ValidationError("--sealed-boxes must be 0…20.") }
            guard (1...16).contains(instances) else { throw ValidationError("--instances must be 1…16.") }
            guard instances == 1 || benchDatabaseURL(databaseUrl) != nil else {
                throw ValidationError("Several instances share a PostgreSQL database: give --database-url or RINGRELAY_DATABASE_URL.")
            }
            if let killOneAfter {
                guard instances >= 2, (1..<duration).contains(killOneAfter) else {
                    throw ValidationError("--kill-one-after needs --instances 2 or more and must be 1…\(duration - 1) (within --duration).")
                }
            }
        }

        func run() async throws {
            let openFiles = raiseOpenFileLimit()
            let perProcess = openFiles - Self.serverReserve
            guard devices <= perProcess else {
                throw ValidationError(
                    """
                    --devices \(devices) is more than one server process can hold here: its hard open-file limit (ulimit -Hn) is \
                    \(openFiles) and about \(Self.serverReserve) go to its own files, so at most \(perProcess) connections. Use \
                    --devices \(perProcess) or less, or raise the hard limit (LimitNOFILE=, /etc/security/limits.conf).
                    """)
            }
            guard (devices + processCount - 1) / processCount <= perProcess else {
                throw ValidationError("--processes \(processCount) leaves more than \(perProcess) devices in one process; use at least \((devices + perProcess - 1) / perProcess).")
            }
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench-live")
            defer { directory.remove() }
            Interruption.onInterrupt { directory.remove() }
            let servers = try BenchInstances(count: instances, databaseURL: benchDatabaseURL(databaseUrl), directory: directory)
            defer { servers.terminate() }
            let result = try await servers.first.withHTTPClient { http in try await measure(http: http, servers: servers, directory: directory) }
            try emit(result, summary: result.summary, json: json)
        }

        private func measure(http: HTTPClient, servers: BenchInstances, directory: TemporaryDirectory) async throws -> LiveBenchResult {
            let api = Setup(http: http, base: servers.first.base)
            let apis = servers.servers.map { Setup(http: http, base: $0.base) }
            let apiKey = try await servers.first.createAccount(http: http).apiKey
            let tokens = try await mintTokens(api, apiKey: apiKey)
            let boxedBindings = try await registerBoxedBindings(api, apiKey: apiKey)
            let baselineRSS = servers.residentMiB()

            // The devices, in contiguous shares, one child process each; device i on instance i mod N.
            let share = (devices + processCount - 1) / processCount
            let url = servers.servers.map { "ws" + $0.base.dropFirst("http".count) + "/v1/connect" }.joined(separator: ",")
            var children: [DeviceProcess] = []
            defer { children.forEach { $0.terminate() } }
            let connectStarted = ContinuousClock.now
            for (number, first) in stride(from: 0, to: devices, by: share).enumerated() {
                let file = directory.appending("devices-\(number)")
                try (first..<min(devices, first + share)).map { "\($0) \(tokens[$0])\n" }.joined().write(toFile: file, atomically: true, encoding: .utf8)
                children.append(
                    try DeviceProcess([
                        "bench", "live-devices", "--url", url, "--tokens-file", file,
                        "--connect-concurrency", String(max(1, connectConcurrency / processCount)),
                    ]))
            }
            var failed = Set<Int>()
            for index in children.indices {
                failed.formUnion(try await children[index].next(LiveDevicesConnected.self).failed)
            }
            let connectSeconds = (ContinuousClock.now - connectStarted).timeInterval
            let reachable = (0..<devices).filter { !failed.contains($0) }

            try await Task.sleep(for: .seconds(settle))
            let idleRSS = servers.residentMiB()
            let serverOpenFiles = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(servers.first.pid)/fd").count

            let load = LoadGenerator(count: rate * duration, concurrency: .max, rate: rate)
            let refusals = Slots<String>(count: load.count)
            let callIDs = Slots<String>(count: load.count)
            let failovers = Mutex(0)
            let killer = killOneAfter.map { seconds in
                Task {
                    try await Task.sleep(for: .seconds(seconds))
                    servers.kill(servers.count - 1)
                }
            }
            let cpuBefore = servers.cpuSeconds()
            let databaseCPUBefore = servers.count > 1 || benchDatabaseURL(databaseUrl) != nil ? ProcessMemory.postgresCPUSeconds() : nil
            let (elapsed, responses) = try await load.run { index in
                guard let device = reachable.randomElement() else { return false }
                let instance = index % servers.count
                let body: String
                if sealedBoxes > 0, index % 2 == 1 {
                    // The box is the send time (the server refuses metadata beside sealed).
                    let box = BenchSealedBox.make(sentNanoseconds: wallClockNanoseconds())
                    let sealed = boxedBindings[device].map { #"{"bindingId":"\#($0)","box":"\#(box)"}"# }.joined(separator: ",")
                    body = #"{"from":"bench-caller","to":"dev-\#(device)","ringTimeoutSeconds":5,"sealed":[\#(sealed)]}"#
                } else {
                    body = #"{"from":"bench-caller","to":"dev-\#(device)","ringTimeoutSeconds":5,"metadata":{"t":\#(wallClockNanoseconds()),"i":\#(instance)}}"#
                }
                // A balancer sends a request that could not reach an instance to the next one.
                var refusal: String?
                for attempt in 0..<servers.count {
                    do {
                        let (status, data) = try await apis[(instance + attempt) % servers.count].exchange(.POST, "/v1/calls", apiKey, body)
                        refusal = status == 201 ? nil : "HTTP \(status)"
                        if let created = try? JSONDecoder().decode(CreatedCall.self, from: data) { callIDs.set(index, created.id) }
                        if attempt > 0 { failovers.withLock { $0 += 1 } }
                        break
                    } catch {
                        refusal = "\(error)"
                    }
                }
                if let refusal { refusals.set(index, refusal) }
                return refusal == nil
            }
            let cpuSeconds = servers.cpuSeconds() - cpuBefore
            let databaseCPUSeconds = databaseCPUBefore.flatMap { before in ProcessMemory.postgresCPUSeconds().map { $0 - before } }
            try await killer?.value
            try await Task.sleep(for: .seconds(2))  // the last events
            let peakRSS = servers.peakResidentMiB()
            // With several instances, every call is read back: each must have ended, wherever it was made.
            let (notFinal, finalSeconds) =
                servers.count > 1 ? try await awaitFinalStates(callIDs.values.compactMap { $0 }, api: apis[0], apiKey: apiKey) : (0, 0)

            var reports: [LiveDevicesReport] = []
            for index in children.indices {
                children[index].send("report")
                reports.append(try await children[index].next(LiveDevicesReport.self))
            }
            for child in children { await child.finish() }
            await servers.stop()

            let ring = reports.flatMap(\.ringToReceiptNs).map { Duration.nanoseconds($0) }.sorted()
            let crossRing = reports.flatMap(\.crossRingToReceiptNs).map { Duration.nanoseconds($0) }.sorted()
            let sealedRing = reports.flatMap(\.sealedRingToReceiptNs).map { Duration.nanoseconds($0) }.sorted()
            let responseLatencies = responses.sorted
            let notCreated = responses.failures.withLock { $0 }
            let missing = max(0, load.count - notCreated - reports.reduce(0) { $0 + $1.incoming })
            let dropped = reports.reduce(0) { $0 + $1.dropped }
            let reconnected = reports.reduce(0) { $0 + $1.reconnected }
            return LiveBenchResult(
                devices: devices, processes: children.count, connected: reachable.count, connectFailures: failed.count,
                connectSeconds: connectSeconds, dropped: dropped, reconnected: reconnected, connectionsHeld: reachable.count - dropped + reconnected,
                serverBaselineRSSMiB: baselineRSS[0], serverIdleRSSMiB: idleRSS[0],
                idleKiBPerConnection: Self.kibPerConnection(idle: idleRSS, baseline: baselineRSS, connections: reachable.count),
                serverOpenFiles: serverOpenFiles, calls: load.count, callsNotCreated: notCreated,
                refusals: refusals.values.compactMap { $0 }.reduce(into: [:]) { $0[$1, default: 0] += 1 }, eventsMissing: missing,
                failures: notCreated + missing + failed.count + dropped - reconnected, seconds: elapsed.timeInterval,
                callsPerSecond: Double(load.count) / elapsed.timeInterval, targetRate: rate,
                ringP50Ms: percentileMs(ring, 0.50), ringP90Ms: percentileMs(ring, 0.90), ringP99Ms: percentileMs(ring, 0.99),
                ringMaxMs: (ring.last ?? .zero).timeInterval * 1000,
                sealedBoxes: sealedBoxes, sealedRings: sealedRing.count,
                sealedRingP50Ms: sealedRing.isEmpty ? nil : percentileMs(sealedRing, 0.50),
                sealedRingP99Ms: sealedRing.isEmpty ? nil : percentileMs(sealedRing, 0.99),
                responseP50Ms: percentileMs(responseLatencies, 0.50), responseP99Ms: percentileMs(responseLatencies, 0.99),
                serverPeakRSSMiB: peakRSS[0],
                instances: servers.count, instanceIdleRSSMiB: idleRSS, instancePeakRSSMiB: peakRSS,
                crossRings: crossRing.count,
                crossRingP50Ms: crossRing.isEmpty ? nil : percentileMs(crossRing, 0.50),
                crossRingP99Ms: crossRing.isEmpty ? nil : percentileMs(crossRing, 0.99),
                serverCPUMicrosecondsPerCall: killOneAfter == nil ? cpuSeconds * 1e6 / Double(max(1, load.count - notCreated)) : nil,
                databaseCPUMicrosecondsPerCall: killOneAfter == nil ? databaseCPUSeconds.map { $0 * 1e6 / Double(max(1, load.count - notCreated)) } : nil,
                killedAfterSeconds: killOneAfter, failovers: failovers.withLock { $0 },
                callsNotFinal: notFinal, finalStatesSeconds: finalSeconds)
        }

        /// Reads every call back, 32 at a time, until none is live (ringing or accepted) or 60 s pass.
        /// - Returns: how many calls were still live at the end, and how long it took.
        private func awaitFinalStates(_ ids: [String], api: Setup, apiKey: String) async throws -> (notFinal: Int, seconds: Double) {
            let started = ContinuousClock.now
            var live = ids
            while !live.isEmpty, ContinuousClock.now - started < .seconds(60) {
                let batch = live
                let stillLive = Slots<String>(count: batch.count)
                _ = try await LoadGenerator(count: batch.count, concurrency: 32, rate: 0).run { index in
                    let answer = try? await api.exchange(.GET, "/v1/calls/\(batch[index])", apiKey, "")
                    let state = answer.flatMap { $0.status == 200 ? (try? JSONDecoder().decode(CallState.self, from: $0.body))?.state : nil }
                    if state == nil || state == "ringing" || state == "accepted" { stillLive.set(index, batch[index]) }
                    return true
                }
                live = stillLive.values.compactMap { $0 }
                if !live.isEmpty { try await Task.sleep(for: .seconds(1)) }
            }
            return (live.count, (ContinuousClock.now - started).timeInterval)
        }

        /// The instances' growth from `baseline` to `idle`, together, per connection (KiB); `nil` when a figure is missing.
        private static func kibPerConnection(idle: [Double?], baseline: [Double?], connections: Int) -> Double? {
            var growth = 0.0
            for (idle, baseline) in zip(idle, baseline) {
                guard let idle, let baseline else { return nil }
                growth += idle - baseline
            }
            return growth * 1024 / Double(max(1, connections))
        }

        private struct CreatedCall: Decodable { var id: String }
        private struct CallState: Decodable { var state: String }

        /// With `--sealed-boxes N`, N bindings with a public key for each device (`deviceId` `d<i>`,
        /// so its live ring carries a box and they wait as its fallback), in batches; returns their
        /// ids by device.
        private func registerBoxedBindings(_ api: Setup, apiKey: String) async throws -> [[String]] {
            guard sealedBoxes > 0 else { return [] }
            let publicKey = P256.KeyAgreement.PrivateKey().publicKey.x963Representation.base64EncodedString()
            let items = (0..<devices).flatMap { device in
                (0..<sealedBoxes).map { box in
                    #"{"identity":"dev-\#(device)","type":"fcm","token":"bench-\#(device)-\#(box)","deviceId":"d\#(device)","publicKey":"\#(publicKey)"}"#
                }
            }
            var ids = Array(repeating: [String](), count: devices)
            for start in stride(from: 0, to: items.count, by: 500) {
                let batch = items[start..<min(items.count, start + 500)]
                let data = try await api.send(.POST, "/v1/bindings/batch", apiKey, #"{"upsert":[\#(batch.joined(separator: ","))]}"#)
                let response = try JSONDecoder.ringRelay.decode(BindingBatchResponse.self, from: data)
                for result in response.upsert {
                    guard let binding = result.binding, let device = Int(binding.identity.dropFirst("dev-".count)) else {
                        throw ValidationError("A bench binding was refused: \(result.error?.message ?? "status \(result.status)").")
                    }
                    ids[device].append(binding.id)
                }
            }
            return ids
        }

        /// One access token per device (`dev-<i>`, `d<i>`), a few requests at a time.
        private func mintTokens(_ api: Setup, apiKey: String) async throws -> [String] {
            let tokens = Slots<String>(count: devices)
            let (_, minting) = try await LoadGenerator(count: devices, concurrency: 16, rate: 0).run { index in
                let body = #"{"identity":"dev-\#(index)","deviceId":"d\#(index)","ttlSeconds":86400}"#
                guard let data = try? await api.send(.POST, "/v1/access-tokens", apiKey, body),
                    let response = try? JSONDecoder.ringRelay.decode(AccessTokenResponse.self, from: data)
                else { return false }
                tokens.set(index, response.token)
                return true
            }
            let failures = minting.failures.withLock { $0 }
            guard failures == 0 else { throw ValidationError("\(failures) of \(devices) access tokens could not be minted.") }
            return tokens.values.map { $0 ?? "" }
        }
    }
}

/// A `bench live-devices` child and its stdio (see ``BenchCommand/LiveDevices``).
struct DeviceProcess {
    let process: Process
    private let input = Pipe()
    private let output = Pipe()
    private var lines: AsyncStream<String>.Iterator

    init(_ arguments: [String]) throws {
        process = Process()
        process.executableURL = BenchServer.executable
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        lines = lineStream(of: output.fileHandleForReading).makeAsyncIterator()
        try process.run()
        Interruption.onInterrupt { [process] in if process.isRunning { process.terminate() } }
    }

    /// The child's next line.
    mutating func next<Line: Decodable>(_ type: Line.Type) async throws -> Line {
        guard let line = await lines.next() else {
            throw ValidationError("A device process (pid \(process.processIdentifier)) ended early; see its errors above.")
        }
        return try JSONDecoder().decode(Line.self, from: Data(line.utf8))
    }

    /// Sends the child a command line.
    func send(_ command: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((command + "\n").utf8))
    }

    /// Closes the child's stdin and waits for it to exit, killing it after `timeout`.
    func finish(timeout: Duration = .seconds(30)) async {
        try? input.fileHandleForWriting.close()
        if await !process.exits(within: timeout) { terminate() }
    }

    /// Kills the child if it still runs.
    func terminate() {
        if process.isRunning { process.terminate() }
    }
}

/// Values filled in by concurrent operations, one slot each.
final class Slots<Value: Sendable>: Sendable {
    private let slots: Mutex<[Value?]>

    init(count: Int) { slots = Mutex(Array(repeating: nil, count: count)) }

    func set(_ index: Int, _ value: Value) { slots.withLock { $0[index] = value } }

    var values: [Value?] { slots.withLock { $0 } }
}

/// What a live-connection benchmark measured.
struct LiveBenchResult: Codable {
    var devices: Int
    var processes: Int
    var connected: Int
    var connectFailures: Int
    var connectSeconds: Double
    /// Connections the server closed during the run.
    var dropped: Int
    /// Devices that connected again, to another instance, after theirs was killed.
    var reconnected: Int
    var connectionsHeld: Int
    var serverBaselineRSSMiB: Double?
    var serverIdleRSSMiB: Double?
    var idleKiBPerConnection: Double?
    var serverOpenFiles: Int?
    var calls: Int
    /// Calls not answered 201.
    var callsNotCreated: Int
    /// Why, and how often: `HTTP <status>` or the client's error.
    var refusals: [String: Int]
    /// Created calls whose `call.incoming` never reached the device.
    var eventsMissing: Int
    /// Everything that went wrong: calls not created, events missing, devices not connected or dropped.
    var failures: Int
    var seconds: Double
    var callsPerSecond: Double
    var targetRate: Int
    var ringP50Ms: Double
    var ringP90Ms: Double
    var ringP99Ms: Double
    var ringMaxMs: Double
    /// Boxes per sealed call (every other call), 0 without sealed calls.
    var sealedBoxes: Int
    /// Sealed rings timed, and their ring-to-receipt (reported apart from the plain ones above).
    var sealedRings: Int
    var sealedRingP50Ms: Double?
    var sealedRingP99Ms: Double?
    var responseP50Ms: Double
    var responseP99Ms: Double
    var serverPeakRSSMiB: Double?
    /// Server instances (sharing a PostgreSQL database when more than one), with each one's RSS.
    var instances: Int
    var instanceIdleRSSMiB: [Double?]
    var instancePeakRSSMiB: [Double?]
    /// Plain rings of calls posted to another instance than the device's (the `ring` figures are the
    /// same-instance ones), with their ring-to-receipt.
    var crossRings: Int
    var crossRingP50Ms: Double?
    var crossRingP99Ms: Double?
    /// CPU (user and system) of all instances over the calls, per call answered 201; not measured when one is killed.
    var serverCPUMicrosecondsPerCall: Double?
    /// The same of PostgreSQL's processes on this machine, when the instances share a database.
    var databaseCPUMicrosecondsPerCall: Double?
    /// Seconds into the calls the last instance was killed, if it was.
    var killedAfterSeconds: Int?
    /// Calls posted to the next instance because theirs could not be reached.
    var failovers: Int
    /// Created calls still ringing or accepted when read back at the end (every one should have ended).
    var callsNotFinal: Int
    var finalStatesSeconds: Double

    /// The sealed rings' line, when there were any.
    private var sealedSummary: String {
        guard sealedBoxes > 0, let p50 = sealedRingP50Ms, let p99 = sealedRingP99Ms else { return "" }
        return "sealed       \(sealedRings) rings with \(sealedBoxes) boxes each: p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", p99)) ms (the line above: the plain calls of the same run)\n"
    }

    var summary: String {
        func mib(_ value: Double?) -> String { value.map { String(format: "%.0f MiB", $0) } ?? "unknown" }
        return """
            devices      \(connected) of \(devices) connected from \(processes) process(es) in \(String(format: "%.1f", connectSeconds)) s (\(connectFailures) failed, \(dropped) dropped later, \(reconnected) of them reconnected); \(connectionsHeld) held at the end
            idle server  \(mib(serverIdleRSSMiB)) RSS with every device connected, \(mib(serverBaselineRSSMiB)) before: \(idleKiBPerConnection.map { String(format: "%.1f KiB", $0) } ?? "unknown") a connection; \(serverOpenFiles.map(String.init) ?? "unknown") open files
            calls        \(calls) at \(targetRate)/s: \(String(format: "%.0f", callsPerSecond)) calls/s over \(String(format: "%.1f", seconds)) s; \(callsNotCreated) not answered 201, \(eventsMissing) never reached the device
            ring→device  p50 \(String(format: "%.2f", ringP50Ms)) ms, p90 \(String(format: "%.2f", ringP90Ms)) ms, p99 \(String(format: "%.2f", ringP99Ms)) ms, max \(String(format: "%.2f", ringMaxMs)) ms (POST sent → call.incoming read by the device)
            \(sealedSummary)refusals     \(refusals.isEmpty ? "none" : refusals.sorted { $0.value > $1.value }.map { "\($0.value) × \($0.key)" }.joined(separator: ", "))
            response     p50 \(String(format: "%.2f", responseP50Ms)) ms, p99 \(String(format: "%.2f", responseP99Ms)) ms (POST /v1/calls)
            server       \(mib(serverPeakRSSMiB)) peak RSS; \(cpuSummary)
            """ + (instances > 1 ? "\n" + instancesSummary : "")
    }

    /// The server's CPU (user and system) over the calls, per call.
    private var cpuSummary: String {
        guard let cpu = serverCPUMicrosecondsPerCall else { return "CPU not measured (an instance was killed)" }
        let database = databaseCPUMicrosecondsPerCall.map { String(format: " + %.0f µs of PostgreSQL's = %.0f µs", $0, cpu + $0) } ?? ""
        return String(format: "%.0f µs of CPU a call answered 201", cpu) + (instances > 1 ? ", all instances together" : "") + database
    }

    /// The lines of a run with several instances.
    private var instancesSummary: String {
        guard instances > 1 else { return "" }
        func mibs(_ values: [Double?]) -> String { values.map { $0.map { String(format: "%.0f", $0) } ?? "gone" }.joined(separator: " / ") + " MiB" }
        let cross = crossRingP50Ms.flatMap { p50 in crossRingP99Ms.map { "p50 \(String(format: "%.2f", p50)) ms, p99 \(String(format: "%.2f", $0)) ms" } } ?? "none"
        let killed = killedAfterSeconds.map { "last instance killed \($0) s into the calls; \(failovers) calls posted to the next instance; " } ?? ""
        return """
            instances    \(instances) on PostgreSQL: idle RSS \(mibs(instanceIdleRSSMiB)), peak \(mibs(instancePeakRSSMiB))
            cross ring   \(crossRings) rings of calls posted to another instance: \(cross) (the ring→device line: same instance)
            final        \(killed)\(callsNotFinal) calls not in a final state after \(String(format: "%.1f", finalStatesSeconds)) s of reading them back
            """
    }
}
