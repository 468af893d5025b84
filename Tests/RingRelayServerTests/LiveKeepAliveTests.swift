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
    @Test func aSilentConnectionIsDroppedAndALiveOneStays() async throws {
        var server = try await TestServer.make(start: Date())
        // Long enough that the answering device's pongs are never late on a loaded machine.
        server.configuration.livePingInterval = .seconds(2)
        let configured = server
        try await configured.withClient(.live) { client in
            let port = try #require(client.port)
            let key = try await client.createAccount("acme", admin: configured.adminToken).apiKey
            let token = try await client.accessToken(identity: "bob", deviceID: "dead", key: key)
            let alive = try await LiveDevice.connect(port: port, token: try await client.accessToken(identity: "bob", deviceID: "alive", key: key))

            // A client that completes the upgrade and then never answers anything, not even pings.
            let received = Received()
            let silent = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { channel in channel.pipeline.addHandler(received) }
                .connect(host: "127.0.0.1", port: port).get()
            let upgrade =
                "GET /v1/connect?access_token=\(token) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            try await silent.writeAndFlush(ByteBuffer(string: upgrade)).get()

            // Gone within two ping intervals (plus slack for a loaded machine).
            let closed = Task { try await silent.closeFuture.get() }
            let dropped = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await closed.value
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(15))
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
            #expect(bytes.contains(0x89), "no ping frame arrived")

            // The answering device outlived several pings and still rings.
            let call = try await client.send(.post, "/v1/calls", token: key, json: #"{"from":"alice","to":"bob"}"#).decode(CallResource.self)
            #expect(call.deliveries?.compactMap(\.deviceId) == ["alive"])
            #expect(try await alive.nextEvent().callId == call.id)
            await alive.close()
        }
    }
}

/// Keeps every byte a raw test connection receives.
private final class Received: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    private let buffer = NIOLockedValueBox<[UInt8]>([])

    var bytes: [UInt8] { buffer.withLockedValue { $0 } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let chunk = unwrapInboundIn(data)
        buffer.withLockedValue { $0.append(contentsOf: chunk.readableBytesView) }
    }
}
