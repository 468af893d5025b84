import NIOCore
import NIOEmbedded
import NIOHTTP2
import Synchronization
import Testing

@testable import RingRelayHTTP2

@Suite struct KeepAliveTests {
    @Test func idleConnectionGetsAPing() throws {
        let pings = Mutex(0)
        let channel = EmbeddedChannel(handler: HTTP2KeepAliveHandler(onPing: { pings.withLock { $0 += 1 } }))
        channel.pipeline.fireUserInboundEventTriggered(IdleStateHandler.IdleStateEvent.all)
        let frame = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        #expect(frame.streamID == .rootStream)
        guard case .ping(_, let ack) = frame.payload else {
            Issue.record("expected a PING frame, got \(frame.payload)")
            return
        }
        #expect(!ack)
        #expect(pings.withLock { $0 } == 1)
        // Other events pass through untouched.
        channel.pipeline.fireUserInboundEventTriggered(IdleStateHandler.IdleStateEvent.read)
        #expect(try channel.readOutbound(as: HTTP2Frame.self) == nil)
        _ = try channel.finish()
    }
}
