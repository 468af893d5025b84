import NIOConcurrencyHelpers
import NIOCore
import RingRelayWire
import NIOWebSocket

/// Keeps a live connection honest without a timer or a task of its own.
///
/// Any frame from the device shows it is still there. A connection quiet for one interval gets a
/// ping; one still quiet at two intervals is closed, so a dead device is dropped within two
/// intervals. Pongs stop here: they only prove the device is alive, so the connection's tasks are
/// never woken for them, and a device that talks (acks, commands) is never pinged at all.
///
/// Each event loop's connections are looked at by one ``KeepAliveSweeper``. This replaces
/// hummingbird-websocket's auto-ping, a sleeping Swift task per connection that hopped to the
/// event loop and back for every ping; per-connection NIO timers were tried too, and their heap
/// of 20,000 scheduled tasks cost more than the pings.
final class LiveKeepAliveHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let interval: TimeAmount
    private var lastRead = NIODeadline.now()
    private var pinged = false
    private var context: ChannelHandlerContext?
    private var sweeper: KeepAliveSweeper?
    /// Where the sweeper keeps this handler, for constant-time removal.
    fileprivate var slot = -1

    init(interval: TimeAmount) {
        self.interval = interval
    }

    func handlerAdded(context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        lastRead = .now()
        self.context = context
        let sweeper = KeepAliveSweeper.on(context.eventLoop)
        sweeper.add(self)
        self.sweeper = sweeper
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
        pinged = false
        guard unwrapInboundIn(data).opcode != .pong else { return }
        context.fireChannelRead(data)
    }

    /// Pings or closes the connection if it has been quiet too long. Run by the sweeper, which
    /// passes its tick so that a dead connection is closed by two intervals, not a tick after.
    fileprivate func sweep(now: NIODeadline, tick: TimeAmount) {
        guard let context else { return }
        let quiet = now - lastRead
        if quiet + tick >= interval + interval {
            stop()
            context.close(promise: nil)
        } else if quiet >= interval, !pinged {
            pinged = true
            let ping = WebSocketFrame(fin: true, opcode: .ping, data: context.channel.allocator.buffer(capacity: 0))
            context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
        }
    }

    private func stop() {
        sweeper?.remove(self)
        sweeper = nil
        context = nil
    }
}

/// Takes a device's acks off the event loop, so a connection's tasks wake only for its commands.
///
/// An unfragmented text frame that the fast parser reads as an `ack` is handled here; every other
/// frame goes on to ``ConnectController``, which answers it (and words any error).
final class LiveAckHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame

    private let hub: LiveHub
    private let key: DeviceKey

    init(hub: LiveHub, key: DeviceKey) {
        self.hub = hub
        self.key = key
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if frame.fin, frame.opcode == .text, !frame.rsv1, !frame.rsv2, !frame.rsv3, let eventID = Self.ackedEventID(in: frame.unmaskedData) {
            hub.ack(eventID, from: key)
            return
        }
        context.fireChannelRead(data)
    }

    /// The event id of an `ack` frame; `nil` for any other frame.
    static func ackedEventID(in payload: ByteBuffer) -> String? {
        guard case .ack(let eventID) = DeviceFrame(fastParsing: payload.readableBytesView) else { return nil }
        return eventID
    }
}

/// Walks one event loop's live connections a few times a second, while it has any.
///
/// Confined to its event loop: only handlers on that loop add and remove themselves, and the sweep
/// runs there. The registry of sweepers is the only state shared between loops.
final class KeepAliveSweeper: @unchecked Sendable {
    /// How often connections are looked at; pings go out at most this late.
    static let tick = TimeAmount.milliseconds(250)

    private static let sweepers = NIOLockedValueBox<[ObjectIdentifier: KeepAliveSweeper]>([:])

    private let eventLoop: any EventLoop
    private var handlers: [LiveKeepAliveHandler] = []
    private var task: RepeatedTask?

    private init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// The sweeper of `eventLoop` (which it keeps alive, so its identifier is never reused).
    static func on(_ eventLoop: any EventLoop) -> KeepAliveSweeper {
        sweepers.withLockedValue { sweepers in
            if let sweeper = sweepers[ObjectIdentifier(eventLoop)] { return sweeper }
            let sweeper = KeepAliveSweeper(eventLoop: eventLoop)
            sweepers[ObjectIdentifier(eventLoop)] = sweeper
            return sweeper
        }
    }

    fileprivate func add(_ handler: LiveKeepAliveHandler) {
        eventLoop.assertInEventLoop()
        handler.slot = handlers.count
        handlers.append(handler)
        if task == nil {
            task = eventLoop.scheduleRepeatedTask(initialDelay: Self.tick, delay: Self.tick) { [self] _ in sweep() }
        }
    }

    fileprivate func remove(_ handler: LiveKeepAliveHandler) {
        eventLoop.assertInEventLoop()
        let slot = handler.slot
        guard slot >= 0 else { return }
        let last = handlers.removeLast()
        if slot < handlers.count {
            handlers[slot] = last
            last.slot = slot
        }
        handler.slot = -1
        if handlers.isEmpty {
            task?.cancel()
            task = nil
        }
    }

    private func sweep() {
        let now = NIODeadline.now()
        // Iterates a snapshot: a ping that fails, or a close, removes handlers as it goes.
        for handler in handlers {
            handler.sweep(now: now, tick: Self.tick)
        }
    }
}

/// Bounds what a live connection can make the server hold for it.
///
/// A device that stops reading (or reads slower than it sends) would otherwise grow the server
/// without bound: every frame it sends may get an answer, and every answer waits in memory. So,
/// while the socket cannot take more (NIO's writability), nothing more is read from the device;
/// and frames waiting to be written, past ``LiveOutboundLimits`` in bytes or in number, end the
/// connection with 1008 (policy violation).
///
/// Ending it: nothing more is queued, the close frame goes after the frames already waiting, and
/// once it is written the server's side of the stream ends. A device that reads again gets
/// everything, the close frame, then the end of the stream. (Closing the socket at once would
/// lose the close frame: with the device's unread frames in the socket, the kernel answers a
/// close with a reset.) What the device sends from then on is read and thrown away, so its own
/// close is seen at once and its frames get no answers; as none of them counts as a sign of life,
/// ``LiveKeepAliveHandler`` closes a device that never reads again within two ping intervals.
final class LiveOutboundBudget: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let limits: LiveOutboundLimits
    private var waitingBytes = 0
    private var waitingFrames = 0
    private var readHeld = false
    private var closing = false

    init(limits: LiveOutboundLimits) {
        self.limits = limits
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let size = unwrapOutboundIn(data).length + 14  // payload and the largest frame header
        guard !closing else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        guard waitingBytes + size <= limits.bytes, waitingFrames < limits.frames else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            closeOverBudget(context: context)
            return
        }
        waitingBytes += size
        waitingFrames += 1
        let written = promise ?? context.eventLoop.makePromise()
        written.futureResult.assumeIsolated().whenComplete { _ in
            self.waitingBytes -= size
            self.waitingFrames -= 1
        }
        context.write(data, promise: written)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        // Backpressure: a device whose answers cannot be written is not read from either (unless
        // the connection is ending: then what it sends is thrown away).
        guard context.channel.isWritable || closing else {
            readHeld = true
            return
        }
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, readHeld {
            readHeld = false
            context.read()
        }
        context.fireChannelWritabilityChanged()
    }

    private func closeOverBudget(context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        if readHeld {
            readHeld = false
            context.read()
        }
        let frame = WebSocketFrame.close(code: .policyViolation, reason: LiveCloseCode.policyViolation.reason, allocator: context.channel.allocator)
        context.writeAndFlush(wrapOutboundOut(frame)).assumeIsolated().whenSuccess {
            context.close(mode: .output, promise: nil)
        }
    }
}

extension WebSocketFrame {
    /// A close frame to write straight to the channel, outside the WebSocket library's close
    /// handshake (which waits for the device's answer).
    static func close(code: WebSocketErrorCode, reason: String, allocator: ByteBufferAllocator) -> WebSocketFrame {
        var data = allocator.buffer(capacity: 2 + reason.utf8.count)
        data.write(webSocketErrorCode: code)
        data.writeString(reason)
        return WebSocketFrame(fin: true, opcode: .connectionClose, data: data)
    }
}

@available(*, unavailable)
extension LiveOutboundBudget: Sendable {}
