import ArgumentParser
import Foundation
import HummingbirdWSClient
import Logging
import NIOWebSocket
import RingRelayCore
import RingRelayWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

extension BenchCommand {
    /// `ringrelay bench live-devices` (hidden): one process's share of `bench live`'s devices.
    ///
    /// Reads `<index> <access token>` lines from --tokens-file and connects each device to --url (device
    /// i to the i mod N-th of N URLs), --connect-concurrency at a time. Every event is acked; every
    /// `call.incoming` is timed from its `metadata.t` (the caller's wall clock when it sent the call, in
    /// nanoseconds), counted as same- or cross-instance by its `metadata.i` (the instance the call was
    /// posted to), and rejected. A device whose connection drops reconnects to the next URL, when there
    /// are several, passing the last event id it saw. Talks
    /// to the parent over stdio, one JSON object a line: prints a ``LiveDevicesConnected`` once every
    /// device has connected or failed, then on the line `report` from stdin prints a
    /// ``LiveDevicesReport``, closes its connections and exits. Exits at once if stdin closes before that
    /// (the parent is gone).
    struct LiveDevices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "live-devices", abstract: "A `bench live` child: holds devices' live connections.", shouldDisplay: false)

        @Option(help: "ws://host:port/v1/connect, or several, comma-separated (one per instance).") var url: String
        @Option(help: "File of '<index> <access token>' lines.") var tokensFile: String
        @Option(help: "Connects in flight at once.") var connectConcurrency = 100

        func run() async throws {
            raiseOpenFileLimit()
            let devices = try String(contentsOfFile: tokensFile, encoding: .utf8).split(separator: "\n").map { line in
                let fields = line.split(separator: " ")
                return (index: Int(fields[0]) ?? -1, token: String(fields[1]))
            }
            let state = DeviceStates()
            let (reportRequests, requestReport) = AsyncStream.makeStream(of: Void.self)
            Task {
                for await command in lineStream(of: FileHandle.standardInput) where command == "report" {
                    requestReport.yield()
                    return
                }
                Foundation.exit(1)  // stdin closed before the report: the parent is gone
            }
            let urls = url.split(separator: ",").map(String.init)
            await withDiscardingTaskGroup { group in
                // Bounded connects: a device counts as in flight until its `ready` frame or its failure.
                let (settled, settle) = AsyncStream.makeStream(of: Void.self)
                var settledEvents = settled.makeAsyncIterator()
                var inFlight = 0
                let started = ContinuousClock.now
                for device in devices {
                    if inFlight >= connectConcurrency {
                        await settledEvents.next()
                        inFlight -= 1
                    }
                    inFlight += 1
                    group.addTask { await Self.hold(device, urls: urls, state: state, settle: settle) }
                }
                for _ in 0..<inFlight { await settledEvents.next() }
                say(lineJSON(state.connected(seconds: (ContinuousClock.now - started).timeInterval)))

                for await _ in reportRequests { break }
                say(lineJSON(state.report()))
                // Close every connection; the group ends as the server answers the closes.
                await withDiscardingTaskGroup { closing in
                    for outbound in state.closeAll() {
                        closing.addTask { try? await outbound.close(.normalClosure, reason: nil) }
                    }
                }
            }
        }

        /// Connects one device and serves its events until the connection ends; after a drop, while
        /// the run goes on and there is another instance, connects again to the next one.
        private static func hold(
            _ device: (index: Int, token: String), urls: [String], state: DeviceStates, settle: AsyncStream<Void>.Continuation
        ) async {
            var logger = Logger(label: "bench-device")
            logger.logLevel = .critical
            let session = DeviceSession()
            var instance = device.index % urls.count
            for attempt in 0... {
                let resume = session.lastEventID.map { "&lastEventId=\($0)" } ?? ""
                let connectedTo = instance
                _ = try? await WebSocketClient.connect(url: "\(urls[instance])?access_token=\(device.token)\(resume)", logger: logger) { inbound, outbound, _ in
                    let decoder = JSONDecoder()
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        let receivedNs = wallClockNanoseconds()
                        guard case .text(let text) = message, let frame = try? decoder.decode(BenchFrame.self, from: Data(text.utf8)) else { continue }
                        if frame.type == "ready" {
                            if session.connected() {
                                state.opened(device.index, outbound)
                                settle.yield()
                            } else {
                                state.reopened(device.index, outbound)
                            }
                            continue
                        }
                        guard let eventId = frame.eventId, let callId = frame.callId else { continue }
                        session.lastEventID = eventId
                        try await outbound.write(.text(#"{"type":"ack","eventId":"\#(eventId)"}"#))
                        guard frame.type == CallEventType.incoming.rawValue else {
                            state.received(ringNs: nil)
                            continue
                        }
                        if let sent = frame.call?.metadata?.t {
                            let cross = frame.call?.metadata?.i.map { $0 != connectedTo } ?? false
                            state.received(ringNs: receivedNs - Int64(sent), cross: cross)
                        } else if let sent = frame.sealed.flatMap(BenchSealedBox.sentNanoseconds) {
                            state.received(ringNs: receivedNs - sent, sealed: true)
                        } else {
                            state.received(ringNs: -1)
                        }
                        try await outbound.write(.text(#"{"type":"reject","callId":"\#(callId)"}"#))
                    }
                }
                guard session.hasConnected else {
                    state.failed(device.index)
                    settle.yield()
                    return
                }
                guard state.ended(device.index), urls.count > 1, attempt < 20 else { return }
                instance = (instance + 1) % urls.count
                try? await Task.sleep(for: .milliseconds(250))
            }
        }

        /// The few members of a server frame a bench device reads; decoding only these keeps the
        /// device processes, which share the server's cores, cheap. Ids are `evt_…` and `call_…`,
        /// so they go into the reply frames without escaping.
        private struct BenchFrame: Decodable {
            struct Call: Decodable {
                struct Metadata: Decodable {
                    var t: Double?
                    var i: Int?
                }
                var metadata: Metadata?
            }
            var type: String
            var eventId: String?
            var callId: String?
            var call: Call?
            /// A sealed ring's box: the bench's own (see ``BenchSealedBox``), not an HPKE one.
            var sealed: String?
        }
    }
}

/// What one bench device remembers across its connections.
private final class DeviceSession: Sendable {
    private let state = Mutex<(connects: Int, lastEventID: String?)>((0, nil))

    /// Notes a connection's `ready`; returns whether it was the device's first.
    func connected() -> Bool { state.withLock { $0.connects += 1; return $0.connects == 1 } }

    var hasConnected: Bool { state.withLock { $0.connects > 0 } }

    /// The last event id the device saw, passed when it reconnects.
    var lastEventID: String? {
        get { state.withLock { $0.lastEventID } }
        set { state.withLock { $0.lastEventID = newValue } }
    }
}

/// A `bench live-devices` child's first line: how its connects went.
struct LiveDevicesConnected: Codable {
    var connected: Int
    /// Indices of the devices that could not connect.
    var failed: [Int]
    var seconds: Double
}

/// A `bench live-devices` child's last line: what its devices received.
struct LiveDevicesReport: Codable {
    /// Ring-to-receipt of every plain `call.incoming` that carried `metadata.t` and was posted to the
    /// device's instance, in nanoseconds.
    var ringToReceiptNs: [Int64]
    /// The same, for calls posted to another instance than the device's.
    var crossRingToReceiptNs: [Int64]
    /// Ring-to-receipt of every sealed `call.incoming` (the time rides in the bench's box).
    var sealedRingToReceiptNs: [Int64]
    /// `call.incoming` events received.
    var incoming: Int
    /// Events of other types (the `call.rejected` that answers each reject).
    var otherEvents: Int
    /// Connections the server closed (or lost) before the report.
    var dropped: Int
    /// Dropped devices that connected again.
    var reconnected: Int
}

/// The devices of one `bench live-devices` process.
final class DeviceStates: Sendable {
    private struct State {
        var open: [Int: WebSocketOutboundWriter] = [:]
        var failed: [Int] = []
        var ringNs: [Int64] = []
        var crossRingNs: [Int64] = []
        var sealedRingNs: [Int64] = []
        var incoming = 0
        var otherEvents = 0
        var dropped = 0
        var reconnected = 0
        var closing = false
    }

    private let state = Mutex(State())

    func opened(_ index: Int, _ outbound: WebSocketOutboundWriter) {
        state.withLock { $0.open[index] = outbound }
    }

    /// A dropped device connected again.
    func reopened(_ index: Int, _ outbound: WebSocketOutboundWriter) {
        state.withLock { state in
            state.open[index] = outbound
            state.reconnected += 1
        }
    }

    /// A device's first connect failed.
    func failed(_ index: Int) {
        state.withLock { $0.failed.append(index) }
    }

    /// Records the end of a device's connection (a drop, unless the run is closing them), or of a
    /// reconnect that failed.
    /// - Returns: whether the run goes on (the device may connect again).
    func ended(_ index: Int) -> Bool {
        state.withLock { state in
            if state.open.removeValue(forKey: index) != nil, !state.closing { state.dropped += 1 }
            return !state.closing
        }
    }

    /// Records an event: a ring with its ring-to-receipt (negative without a send time), plain or
    /// sealed, posted to the device's instance or another (`cross`), or another event (`nil`).
    func received(ringNs: Int64?, sealed: Bool = false, cross: Bool = false) {
        state.withLock { state in
            guard let ringNs else { return state.otherEvents += 1 }
            state.incoming += 1
            guard ringNs >= 0 else { return }
            if sealed {
                state.sealedRingNs.append(ringNs)
            } else if cross {
                state.crossRingNs.append(ringNs)
            } else {
                state.ringNs.append(ringNs)
            }
        }
    }

    func connected(seconds: Double) -> LiveDevicesConnected {
        state.withLock { state in
            LiveDevicesConnected(connected: state.open.count, failed: state.failed, seconds: seconds)
        }
    }

    func report() -> LiveDevicesReport {
        state.withLock {
            LiveDevicesReport(
                ringToReceiptNs: $0.ringNs, crossRingToReceiptNs: $0.crossRingNs, sealedRingToReceiptNs: $0.sealedRingNs, incoming: $0.incoming,
                otherEvents: $0.otherEvents, dropped: $0.dropped, reconnected: $0.reconnected)
        }
    }

    /// Marks the end of the run and returns the open connections to close.
    func closeAll() -> [WebSocketOutboundWriter] {
        state.withLock { state in
            state.closing = true
            return Array(state.open.values)
        }
    }
}

/// Now on the wall clock, in nanoseconds since 1970 (comparable across processes).
func wallClockNanoseconds() -> Int64 {
    Int64(Date().timeIntervalSince1970 * 1e9)
}

/// One line of compact JSON.
func lineJSON(_ value: some Encodable) -> String {
    String(decoding: (try? JSONEncoder().encode(value)) ?? Data(), as: UTF8.self)
}

/// The lines written to `handle` (a pipe), as they arrive; ends at end of file. Foundation reads on
/// its own thread, so no concurrency thread blocks.
func lineStream(of handle: FileHandle) -> AsyncStream<String> {
    final class Pending: Sendable {
        let bytes = Mutex(Data())
    }
    let pending = Pending()
    return AsyncStream { continuation in
        handle.readabilityHandler = { handle in
            let data = handle.availableData
            pending.bytes.withLock { bytes in
                bytes.append(data)
                while let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) {
                    continuation.yield(String(decoding: bytes[bytes.startIndex..<newline], as: UTF8.self))
                    bytes.removeSubrange(bytes.startIndex...newline)
                }
                if data.isEmpty {
                    handle.readabilityHandler = nil
                    if !bytes.isEmpty { continuation.yield(String(decoding: bytes, as: UTF8.self)) }
                    continuation.finish()
                }
            }
        }
    }
}

/// Raises this process's soft open-file limit to its hard limit (children inherit it) and returns
/// the hard limit.
@discardableResult func raiseOpenFileLimit() -> Int {
    var limit = rlimit()
    #if canImport(Glibc)
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    let resource = RLIMIT_NOFILE
    #endif
    guard getrlimit(resource, &limit) == 0 else { return Int.max }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
    }
    return limit.rlim_max >= rlim_t(Int.max) ? Int.max : Int(limit.rlim_max)
}

/// The box of a sealed call in `bench live --sealed-boxes`: the server relays boxes without reading
/// them, so the bench's box is its send time (wall clock, nanoseconds) padded to the size of a real
/// sealed invite, base64. It measures what the server does with sealed calls, not the SDK's HPKE
/// (`ringrelay bench sealed` does that).
enum BenchSealedBox {
    /// Bytes before base64: 924 characters, the size of RingRelayKit's sealed invite with a name
    /// and 256 bytes of metadata (see `bench sealed`).
    static let size = 693

    static func make(sentNanoseconds: Int64) -> String {
        var bytes = Array("t=\(sentNanoseconds);".utf8)
        bytes += Array(repeating: UInt8(ascii: "."), count: max(0, size - bytes.count))
        return Data(bytes).base64EncodedString()
    }

    static func sentNanoseconds(_ box: String) -> Int64? {
        guard let data = Data(base64Encoded: box), let text = String(data: data.prefix(32), encoding: .utf8),
            text.hasPrefix("t="), let end = text.firstIndex(of: ";")
        else { return nil }
        return Int64(text[text.index(text.startIndex, offsetBy: 2)..<end])
    }
}
