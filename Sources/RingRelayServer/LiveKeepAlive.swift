import NIOCore
import NIOWebSocket
import RingRelayCore

/// Keeps a live connection honest with one event-loop timer.
///
/// Any frame from the device shows it is still there. A connection quiet for one interval gets a
/// ping; one still quiet a second interval later is closed, so a dead device is dropped within two
/// intervals. Pongs stop here: they only prove the device is alive, so the connection's tasks are
/// never woken for them, and a device that talks (acks, commands) is never pinged at all.
///
/// This replaces hummingbird-websocket's auto-ping, which keeps a sleeping Swift task per
/// connection and wakes it, hops to the event loop and back for every ping and pong.
final class LiveKeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let interval: TimeAmount
    private var lastRead = NIODeadline.now()
    private var timer: Scheduled<Void>?

    init(interval: TimeAmount) {
        self.interval = interval
    }

    /// Adds the handler to an upgraded WebSocket channel, where it sees decoded frames and its
    /// pings pass through the frame encoder.
    static func install(on channel: any Channel, interval: Duration) async throws {
        let amount = TimeAmount.nanoseconds(interval.nanoseconds)
        try await channel.eventLoop.submit {
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(LiveKeepAliveHandler(interval: amount), position: .after(decoder))
        }.get()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        lastRead = .now()
        if context.channel.isActive { schedule(context, at: lastRead + interval) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = .now()
        guard unwrapInboundIn(data).opcode != .pong else { return }
        context.fireChannelRead(data)
    }

    private func check(_ context: ChannelHandlerContext) {
        timer = nil
        let quiet = NIODeadline.now() - lastRead
        if quiet >= interval + interval {
            context.close(promise: nil)
        } else if quiet >= interval {
            let ping = WebSocketFrame(fin: true, opcode: .ping, data: context.channel.allocator.buffer(capacity: 0))
            context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
            schedule(context, at: lastRead + interval + interval)
        } else {
            schedule(context, at: lastRead + interval)
        }
    }

    private func schedule(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.check(context)
        }
    }

    private func stop() {
        timer?.cancel()
        timer = nil
    }
}
