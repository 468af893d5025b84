import NIOCore
import NIOPosix

/// Open-loop HTTP/1.1 load that costs its own process little CPU, for benchmarks whose load runs
/// on the same cores as the server it measures.
///
/// Requests are whole HTTP/1.1 messages, serialized before the clock starts. Each is written as
/// bytes when it is due, on a keep-alive connection with nothing in flight (a new connection when
/// every one is busy, so a slow answer never holds the next request back), and its latency runs
/// from the moment it was due, not from when it could be sent: a stall of the server counts for
/// every request it delayed. Everything runs on one event loop, without locks.
///
/// Answers must have a `Content-Length` (RingRelay's do); anything else, or a connection that
/// closes with a request in flight, counts as a failed request.
final class OpenLoopHTTP1Load: Sendable {
    private let host: String
    private let port: Int
    private let requests: [ByteBuffer]
    private let rate: Int
    private let loop: any EventLoop
    private let onSend: @Sendable (Int) -> Void

    /// - Parameters:
    ///   - requests: the messages, sent in order.
    ///   - rate: requests started per second.
    ///   - onSend: told each request's index as it is sent.
    init(
        host: String, port: Int, requests: [ByteBuffer], rate: Int, loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next(),
        onSend: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.host = host
        self.port = port
        self.requests = requests
        self.rate = rate
        self.loop = loop
        self.onSend = onSend
    }

    /// Sends every request at its time and returns once each is answered or failed.
    func run() async throws -> (elapsed: Duration, tally: Tally) {
        let tally = Tally()
        let done = loop.makePromise(of: Void.self)
        let started = NIODeadline.now()
        loop.execute { [self] in
            let driver = Driver(load: self, tally: tally, started: started, done: done)
            driver.tick()
        }
        try await done.futureResult.get()
        return (.nanoseconds((NIODeadline.now() - started).nanoseconds), tally)
    }

    /// The status of the first whole answer in `buffer`, which it then drops; `nil` until one
    /// is whole. An answer without `Content-Length` reads as status 0, and what follows it is
    /// left unread (the connection is of no further use).
    static func answer(in buffer: inout ByteBuffer) -> Int? {
        let found: (head: String, bytes: Int)? = buffer.withUnsafeReadableBytes { bytes in
            // A plain scan: `firstRange(of:)` on the bytes was most of this process's CPU.
            guard bytes.count >= 4 else { return nil }
            for index in 3..<bytes.count
            where bytes[index] == 10 && bytes[index - 1] == 13 && bytes[index - 2] == 10 && bytes[index - 3] == 13 {
                return (String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<(index + 1)]), as: UTF8.self), index + 1)
            }
            return nil
        }
        guard let (head, headBytes) = found else { return nil }
        let lines = head.split(separator: "\r\n")
        let status = lines.first.flatMap { $0.split(separator: " ").dropFirst().first }.flatMap { Int($0) } ?? 0
        let length = lines.dropFirst().lazy.compactMap { line -> Int? in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
            return Int(parts[1].drop { $0 == " " })
        }.first
        guard let length else {
            buffer.moveReaderIndex(forwardBy: headBytes)
            return 0
        }
        guard buffer.readableBytes >= headBytes + length else { return nil }
        buffer.moveReaderIndex(forwardBy: headBytes + length)
        buffer.discardReadBytes()
        return status
    }

    /// The state of one run, touched only on the load's event loop.
    private final class Driver: @unchecked Sendable {
        let load: OpenLoopHTTP1Load
        let tally: Tally
        let started: NIODeadline
        let done: EventLoopPromise<Void>
        var next = 0
        var finished = 0
        var idle: [Connection] = []

        init(load: OpenLoopHTTP1Load, tally: Tally, started: NIODeadline, done: EventLoopPromise<Void>) {
            self.load = load
            self.tally = tally
            self.started = started
            self.done = done
        }

        func due(_ index: Int) -> NIODeadline {
            started + .nanoseconds(Int64(index) * 1_000_000_000 / Int64(load.rate))
        }

        /// Sends what is due, then sleeps until the next one is.
        func tick() {
            let now = NIODeadline.now()
            while next < load.requests.count, due(next) <= now {
                send(next)
                next += 1
            }
            guard next < load.requests.count else { return }
            load.loop.assumeIsolated().scheduleTask(deadline: due(next)) { self.tick() }
        }

        func send(_ index: Int) {
            load.onSend(index)
            if let connection = idle.popLast() {
                connection.send(index, load.requests[index])
                return
            }
            let connection = Connection(driver: self)
            connection.queued = index
            ClientBootstrap(group: load.loop)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(connection) }
                }
                .connect(host: load.host, port: load.port)
                .whenFailure { _ in
                    self.load.loop.execute { self.answered(index, succeeded: false, connection: nil) }
                }
        }

        func answered(_ index: Int, succeeded: Bool, connection: Connection?) {
            tally.record(.nanoseconds((NIODeadline.now() - due(index)).nanoseconds), succeeded: succeeded, index: index)
            if let connection { idle.append(connection) }
            finished += 1
            if finished == load.requests.count {
                for connection in idle { connection.close() }
                idle = []
                done.succeed()
            }
        }
    }

    /// One keep-alive connection: one request in flight at most, its answer read by length.
    private final class Connection: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer

        private let driver: Driver
        private var context: ChannelHandlerContext?
        /// A request waiting for the connection to open.
        var queued: Int?
        private var inFlight: Int?
        private var received = ByteBuffer()

        init(driver: Driver) {
            self.driver = driver
        }

        func channelActive(context: ChannelHandlerContext) {
            self.context = context
            if let index = queued {
                queued = nil
                send(index, driver.load.requests[index])
            }
            context.fireChannelActive()
        }

        func send(_ index: Int, _ request: ByteBuffer) {
            inFlight = index
            context?.writeAndFlush(NIOAny(request), promise: nil)
        }

        func close() {
            context?.close(promise: nil)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            received.writeBuffer(&bytes)
            guard let index = inFlight, let status = OpenLoopHTTP1Load.answer(in: &received) else { return }
            inFlight = nil
            guard status != 0 else {
                driver.answered(index, succeeded: false, connection: nil)
                return context.close(promise: nil)
            }
            driver.answered(index, succeeded: status == 200, connection: self)
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.context = nil
            driver.idle.removeAll { $0 === self }
            if let index = inFlight ?? queued {
                inFlight = nil
                queued = nil
                driver.answered(index, succeeded: false, connection: nil)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
