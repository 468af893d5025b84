import NIOCore
import NIOPosix
import Synchronization
import Testing

/// A TCP server on loopback that is not what a client hopes for: it answers each connection's
/// first bytes with `reply` (nothing at all, a plain HTTP answer to a TLS handshake, TLS to
/// plain HTTP) and hangs up. It counts the connections it took, so a test can wait for retries.
final class HangUpServer: Sendable {
    /// The port it listens on, at 127.0.0.1.
    let port: Int
    private let channel: NIOAsyncChannel<NIOAsyncChannel<ByteBuffer, ByteBuffer>, Never>
    private let accepted = Count()
    private let task: Task<Void, Never>

    private final class Count: Sendable {
        let value = Mutex(0)
    }

    /// Connections taken so far.
    var connections: Int { accepted.value.withLock { $0 } }

    init(reply: [UInt8]) async throws {
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { child in
                child.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: child) }
            }
        port = try #require(channel.channel.localAddress?.port)
        task = Task { [channel, accepted] in
            try? await channel.executeThenClose { connections in
                for try await connection in connections {
                    accepted.value.withLock { $0 += 1 }
                    try? await connection.executeThenClose { inbound, outbound in
                        for try await _ in inbound {
                            if !reply.isEmpty { try await outbound.write(ByteBuffer(bytes: reply)) }
                            return
                        }
                    }
                }
            }
        }
    }

    /// Closes the listening socket; the port refuses connections from then on.
    func stop() async {
        try? await channel.channel.close()
        await task.value
    }
}
