import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOEmbedded
import NIOWebSocket
import RingRelayWire
import Testing

@testable import RingRelayServer

/// Devices that send junk, or stop reading (issue 16 item 3).
@Suite struct HostileLiveClientTests {
    /// Error frames never echo the device's unbounded text: a 15 KB field name or frame type, or
    /// one character of 5,000 combining marks, comes back as at most 64 bytes.
    @Test func errorFramesDoNotEchoUnboundedClientText() async throws {
        let server = try await TestServer.make(start: Date())
        let adminToken = server.adminToken
        try await server.withClient(.live) { client in
            let port = try #require(client.port)
            let key = try await client.createAccount("acme", admin: adminToken).apiKey
            let token = try await client.accessToken(identity: "bob", deviceID: "b1", key: key)
            let device = try await RawSocket.offThePool { try RawWebSocket(port: port, path: "/v1/connect?access_token=\(token)", receiveBuffer: 1 << 20) }
            defer { device.close() }
            #expect(device.handshake.hasPrefix("HTTP/1.1 101"), "\(device.handshake)")
            let junk = String(repeating: "j", count: 15_000)
            // One character: an "e" and 5,000 combining acute accents (10 KB).
            let accented = "e" + String(repeating: "\u{301}", count: 5_000)
            let frames = [
                (#"{"type":"pong","\#(junk)":1}"#, "unknown_field"), (#"{"type":"\#(junk)"}"#, "unknown_frame_type"),
                (#"{"type":"ping","\#(accented)":1}"#, "unknown_field"), (#"{"type":"\#(accented)"}"#, "unknown_frame_type"),
            ]
            for (frame, code) in frames {
                #expect(try await RawSocket.offThePool { device.sendTextFrames(Array(frame.utf8), count: 20, giveUpAfter: .seconds(5)) } == 20)
                let marker = Array(code.utf8)
                let answers = try await RawSocket.offThePool { device.read(for: .seconds(10)) { $0.ranges(of: marker).count >= 20 } }
                #expect(answers.ranges(of: marker).count == 20, "every frame got its \(code) error frame (\(answers.count) bytes)")
                #expect(answers.count < 20 * 400, "no answer echoes 10-15 KB (\(answers.count) bytes for 20 answers)")
                #expect(answers.firstRange(of: Array(String(repeating: "j", count: 65).utf8)) == nil)
                #expect(answers.firstRange(of: Array(String(repeating: "\u{301}", count: 33).utf8)) == nil)
            }
        }
    }

    /// A device that floods junk frames and never reads, on a real socket: once the answers
    /// waiting for it pass its outbound budget, the server answers nothing more and ends the
    /// connection with 1008 and its reason, after the answers that waited; it serves everyone
    /// else meanwhile.
    @Test func aDeviceThatNeverReadsIsClosedPastItsBudget() async throws {
        var server = try await TestServer.make(start: Date())
        // Under NIO's 64 KiB high-water mark, so that the waiting answers pass the budget before
        // reads are held for writability (which would only hold this device, not close it).
        server.configuration.liveOutboundBudget = LiveOutboundLimits(bytes: 16 * 1024, frames: 1024)
        // The test's HTTP connection waits unused while the device floods and reads (up to 70 s):
        // with the default 60 s idle timeout a loaded machine saw the server close it, and the
        // next request failed with "I/O on closed channel".
        server.configuration.idleTimeout = .seconds(600)
        let adminToken = server.adminToken
        try await server.withClient(.live) { client in
            let port = try #require(client.port)
            let key = try await client.createAccount("acme", admin: adminToken).apiKey
            let token = try await client.accessToken(identity: "bob", deviceID: "b1", key: key)
            // An internet-sized segment: the server's kernel then takes about 100 KB of answers
            // before they wait in the server on a quiet machine (with loopback's segments, 4 MB).
            let device = try await RawSocket.offThePool {
                try RawWebSocket(port: port, path: "/v1/connect?access_token=\(token)", receiveBuffer: 4096, maxSegment: 1400)
            }
            defer { device.close() }
            #expect(device.handshake.hasPrefix("HTTP/1.1 101"), "\(device.handshake)")
            // The kernels took about 850 KB of answers here (4,900 of ~170 bytes) before any waited
            // in the server. A flood of 5,000 frames was at that edge, and on a loaded machine it
            // was answered in full without reaching the budget. The flood is therefore sized for
            // the most a kernel here can take: the server's send buffer is at most
            // net.ipv4.tcp_wmem's 4 MiB, about 25,000 answers. Small frames get there in seconds;
            // an answer echoes at most 64 bytes of the name, so bigger frames would not help.
            let junk = Array(#"{"type":"ping","\#(String(repeating: "j", count: 120))":1}"#.utf8)
            let sent = try await RawSocket.offThePool { device.sendTextFrames(junk, count: 100_000, giveUpAfter: .seconds(10)) }

            let (received, ended) = try await RawSocket.offThePool { device.readToEnd(within: .seconds(60)) }
            #expect(ended, "the server did not end the stream after its close frame")
            let frames = RawWebSocket.frames(in: received)
            let close = try #require(frames.last, "nothing came back")
            #expect(close.opcode == 0x8, "the last frame is not a close frame: \(frames.count) frames")
            #expect(close.payload.prefix(2) == [0x03, 0xF0], "close code \(close.payload.prefix(2)), not 1008")
            #expect(String(decoding: close.payload.dropFirst(2), as: UTF8.self) == LiveCloseCode.policyViolation.reason)
            #expect(frames.filter { $0.opcode == 0x8 }.count == 1)
            // The 1008 close proves the budget ran out; this, that the server stopped answering. How
            // many answers the kernels take before they wait in the server varies with timing.
            #expect(frames.count < sent * 9 / 10, "\(frames.count) frames came back for \(sent) sent: the server went on answering")

            // The server goes on serving: another device's ping is answered, and so is the API.
            let otherToken = try await client.accessToken(identity: "carol", deviceID: "c1", key: key)
            let other = try await RawSocket.offThePool { try RawWebSocket(port: port, path: "/v1/connect?access_token=\(otherToken)", receiveBuffer: 1 << 16) }
            defer { other.close() }
            let pong = Array(#""type":"pong""#.utf8)
            let answered = try await RawSocket.offThePool {
                _ = other.sendTextFrames(Array(#"{"type":"ping"}"#.utf8), count: 1, giveUpAfter: .seconds(5))
                return other.read(for: .seconds(20)) { $0.firstRange(of: pong) != nil }
            }
            #expect(answered.firstRange(of: pong) != nil, "no pong")
            #expect(try await client.send(.get, "/healthz").status == .ok)
        }
    }

    /// Frames waiting to be written past the budget close the connection with 1008; nothing is
    /// read from a connection that cannot be written to.
    @Test func theOutboundBudgetClosesAndHoldsReads() throws {
        let reads = ReadCounter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(reads)
        try channel.pipeline.syncOperations.addHandler(LiveOutboundBudget(limits: LiveOutboundLimits(bytes: 10_000, frames: 5)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()

        // Not writable: a read request stops here; writable again, it goes on.
        channel.isWritable = false
        channel.read()
        #expect(reads.count == 0)
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        #expect(reads.count == 1)

        // Five frames wait unflushed (the device reads nothing); the sixth is over the budget.
        for _ in 0..<5 { channel.write(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "ring")), promise: nil) }
        #expect(channel.isActive)
        channel.write(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: "one too many")), promise: nil)
        #expect(!channel.isActive, "closed past the budget")
        var closeFrame: WebSocketFrame?
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) { closeFrame = frame }
        #expect(closeFrame?.opcode == .connectionClose)
        var data = closeFrame?.data
        #expect(data?.readWebSocketErrorCode() == .policyViolation)
    }
}

/// Counts the read requests that reach the head of the pipeline.
private final class ReadCounter: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny
    var count = 0

    func read(context: ChannelHandlerContext) {
        count += 1
        context.read()
    }
}

/// A WebSocket client on a raw socket: it upgrades, writes masked text frames and reads only when told.
final class RawWebSocket: @unchecked Sendable {
    let fd: Int32
    let handshake: String

    /// Connects; with a `path`, upgrades to a WebSocket (without one, it only holds a connection).
    init(port: Int, path: String?, receiveBuffer: Int32, maxSegment: Int32? = nil) throws {
        let descriptor = try RawSocket.connected(port: port, receiveBuffer: receiveBuffer, maxSegment: maxSegment)
        guard let path else {
            fd = descriptor
            handshake = ""
            return
        }
        let request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        _ = Array(request.utf8).withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // A loaded 2-core machine can take seconds to answer an upgrade.
        var wait = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        // Read the handshake answer only, byte by byte up to its blank line (the `ready` frame stays unread).
        var answer: [UInt8] = []
        var byte: UInt8 = 0
        while !answer.ends(with: Array("\r\n\r\n".utf8)), recv(descriptor, &byte, 1, 0) == 1 { answer.append(byte) }
        fd = descriptor
        handshake = String(decoding: answer, as: UTF8.self)
    }

    /// Sends up to `count` masked text frames without blocking; stops when the socket has taken
    /// nothing for `giveUpAfter`. Returns how many were sent whole.
    func sendTextFrames(_ payload: [UInt8], count: Int, giveUpAfter: Duration) -> Int {
        var frame: [UInt8] = [0x81, 0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF), 1, 2, 3, 4]
        frame += payload.enumerated().map { $0.element ^ [1, 2, 3, 4][$0.offset % 4] }
        var sent = 0
        while sent < count {
            var offset = 0
            var lastProgress = ContinuousClock.now
            while offset < frame.count {
                let written = frame[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if written > 0 {
                    offset += written
                    lastProgress = .now
                } else if errno == EAGAIN || errno == EWOULDBLOCK {
                    if ContinuousClock.now - lastProgress > giveUpAfter { return sent }
                    usleep(10_000)
                } else {
                    return sent
                }
            }
            sent += 1
        }
        return sent
    }

    /// What arrives until `enough` says so, or `window` passes.
    func read(for window: Duration, until enough: ([UInt8]) -> Bool) -> [UInt8] {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + window
        while ContinuousClock.now < deadline, !enough(data) {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { data += buffer[0..<count] } else if count == 0 { break } else { usleep(10_000) }
        }
        return data
    }

    /// Everything until the server ends the stream (`ended`), resets it, or `window` passes.
    func readToEnd(within window: Duration) -> (data: [UInt8], ended: Bool) {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + window
        while ContinuousClock.now < deadline {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                data += buffer[0..<count]
            } else if count == 0 {
                return (data, true)
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                usleep(10_000)
            } else {
                break
            }
        }
        return (data, false)
    }

    /// The frames in what a server sent (unmasked): each one's opcode and payload; a frame cut
    /// short at the end is left out.
    static func frames(in data: [UInt8]) -> [(opcode: UInt8, payload: [UInt8])] {
        var frames: [(opcode: UInt8, payload: [UInt8])] = []
        var index = 0
        while index + 2 <= data.count {
            var length = Int(data[index + 1] & 0x7F)
            var start = index + 2
            if length == 126 {
                guard start + 2 <= data.count else { break }
                length = Int(data[start]) << 8 | Int(data[start + 1])
                start += 2
            } else if length == 127 {
                guard start + 8 <= data.count else { break }
                length = data[start..<start + 8].reduce(0) { $0 << 8 | Int($1) }
                start += 8
            }
            guard start + length <= data.count else { break }
            frames.append((data[index] & 0x0F, Array(data[start..<start + length])))
            index = start + length
        }
        return frames
    }

    func close() {
        _ = Glibc.close(fd)
    }
}

extension Array where Element == UInt8 {
    fileprivate func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
