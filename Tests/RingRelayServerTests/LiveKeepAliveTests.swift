import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NIOConcurrencyHelpers
import NIOPosix
@testable import RingRelayServer
import RingRelayTesting
import RingRelayWire
import Testing

/// Server pings: a connection that stops answering is dropped, one that answers stays.
@Suite struct LiveKeepAliveTests {
    /// A live server pinging after 2 s of quiet (long enough that an answering device's pongs are
    /// never late on a loaded machine), its port, and an account's API key.
    private func withLiveServer(
        pingInterval: Duration = .seconds(2), _ body: @Sendable (any TestClientProtocol, Int, String) async throws -> Void
    ) async throws {
        var server = try await TestServer.make(start: Date())
        server.configuration.livePingInterval = pingInterval
        let configured = server
        try await configured.withClient(.live) { client in
            let port = try #require(client.port)
            let key = try await client.createAccount("acme", admin: configured.adminToken).apiKey
            try await body(client, port, key)
        }
    }

    @Test func aSilentConnectionIsDroppedAndALiveOneStays() async throws {
        // 5 s: the answering device is this test process, which a loaded machine can starve for
        // seconds; its pong must still come before the second interval ends.
        try await withLiveServer(pingInterval: .seconds(5)) { client, port, key in
            let token = try await client.accessToken(identity: "bob", deviceID: "dead", key: key)
            let alive = try await LiveDevice.connect(port: port, token: try await client.accessToken(identity: "bob", deviceID: "alive", key: key))

            // A client that completes the upgrade and then never answers anything, not even pings.
            let (silent, received) = try await RawConnection.open(port: port, token: token)

            // Gone within two ping intervals (plus slack for a loaded machine).
            let closed = Task { try await silent.closeFuture.get() }
            let dropped = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await closed.value
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(20))
                    return false
                }
                let first = try await group.next() ?? false
                group.cancelAll()
                return first
            }
            #expect(dropped, "the server kept a connection that answers no pings")
            // It was upgraded first, and pinged before it was dropped.
            let bytes = received.bytes
            #expect(String(decoding: bytes.prefix(40), as: UTF8.self).hasPrefix("HTTP/1.1 101"))
            #expect(received.opcodes.contains(0x9), "no ping frame arrived")

            // The answering device outlived several pings and still rings.
            let response = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#)
            #expect(response.status == .created, "\(String(buffer: response.body))")
            let call = try response.decode(CallResource.self)
            #expect(call.deliveries?.compactMap(\.deviceId) == ["alive"])
            #expect(try await alive.nextEvent().callId == call.id)
            await alive.close()
        }
    }

    @Test func aTalkingDeviceIsNeverPinged() async throws {
        // A 6 s interval: a starved test process (or server loop) must not open a gap that long
        // between the frames the server reads, which would rightly earn a ping.
        try await withLiveServer(pingInterval: .seconds(6)) { client, port, key in
            let token = try await client.accessToken(identity: "bob", deviceID: "chatty", key: key)
            // It never answers pings, but sends an application ping every 300 ms, well inside the interval.
            let (chatty, received) = try await RawConnection.open(port: port, token: token)
            var longestGap = Duration.zero
            var last = ContinuousClock.now
            for _ in 0..<44 {
                try await chatty.writeAndFlush(RawConnection.maskedText(#"{"type":"ping"}"#)).get()
                longestGap = max(longestGap, ContinuousClock.now - last)
                last = ContinuousClock.now
                try await Task.sleep(for: .milliseconds(300))
            }
            // 13 s is past the two intervals that drop a quiet device.
            #expect(chatty.isActive, "the server dropped a device that was talking")
            // A test process starved for a whole interval (a build beside it) did fall silent:
            // then a ping is the server's right, and only the checks above hold.
            if longestGap < .seconds(4) {
                #expect(!received.opcodes.contains(0x9), "a device that talks was pinged (longest gap between its frames: \(longestGap))")
            }
            #expect(String(decoding: received.bytes, as: UTF8.self).contains(#""type":"pong""#), "the application pings got no pong")
            try await chatty.close()
        }
    }
}

/// A WebSocket client made of bytes, for what a well-behaved client library would hide.
private enum RawConnection {
    /// Opens `/v1/connect` and sends the upgrade; everything received lands in the returned handler.
    static func open(port: Int, token: String) async throws -> (any Channel, Received) {
        let received = Received()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in channel.pipeline.addHandler(received) }
            .connect(host: "127.0.0.1", port: port).get()
        let upgrade =
            "GET /v1/connect?access_token=\(token) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        try await channel.writeAndFlush(ByteBuffer(string: upgrade)).get()
        return (channel, received)
    }

    /// A short text frame as a client must send it: masked (with a zero key, which leaves the bytes as they are).
    static func maskedText(_ text: String) -> ByteBuffer {
        var frame = ByteBuffer(bytes: [0x81, 0x80 | UInt8(text.utf8.count), 0, 0, 0, 0])
        frame.writeString(text)
        return frame
    }
}

/// Keeps every byte a raw test connection receives.
private final class Received: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    private let buffer = NIOLockedValueBox<[UInt8]>([])

    var bytes: [UInt8] { buffer.withLockedValue { $0 } }

    /// The opcodes of the WebSocket frames after the upgrade answer, in order (server frames are
    /// unmasked): read from the frame headers, not by looking for a byte that a length or a
    /// payload can contain too.
    var opcodes: [UInt8] {
        let bytes = self.bytes
        guard let headerEnd = bytes.indices.first(where: { bytes[$0...].starts(with: [13, 10, 13, 10]) }) else { return [] }
        var opcodes: [UInt8] = []
        var index = headerEnd + 4
        while index + 2 <= bytes.count {
            opcodes.append(bytes[index] & 0x0F)
            var length = Int(bytes[index + 1] & 0x7F)
            index += 2
            if length == 126, index + 2 <= bytes.count {
                length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
                index += 2
            } else if length == 127, index + 8 <= bytes.count {
                length = bytes[index..<index + 8].reduce(0) { $0 << 8 | Int($1) }
                index += 8
            }
            index += length
        }
        return opcodes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let chunk = unwrapInboundIn(data)
        buffer.withLockedValue { $0.append(contentsOf: chunk.readableBytesView) }
    }
}
