import NIOCore
import NIOHTTP2

/// Sends an HTTP/2 PING when a connection has seen no traffic for a while.
///
/// Apple asks providers to keep connections for hours and PING them when mostly idle, rather
/// than reconnecting for every burst. An `IdleStateHandler` in front of the HTTP/2 handler watches
/// the raw bytes; this handler, behind it, turns its idle event into a PING frame.
final class APNsKeepAliveHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let onPing: @Sendable () -> Void

    init(onPing: @escaping @Sendable () -> Void = {}) {
        self.onPing = onPing
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .all {
            let ping = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: .random(in: .min ... .max)), ack: false))
            context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
            onPing()
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Adds the idle watcher and the PING sender around a connection's HTTP/2 handler; call on
    /// the connection's event loop.
    static func add(to pipeline: ChannelPipeline.SynchronousOperations, idleTime: TimeAmount, onPing: @escaping @Sendable () -> Void) throws {
        let http2 = try pipeline.handler(type: NIOHTTP2Handler.self)
        try pipeline.addHandler(IdleStateHandler(allTimeout: idleTime), position: .before(http2))
        try pipeline.addHandler(APNsKeepAliveHandler(onPing: onPing), position: .after(http2))
    }
}
