import NIOCore
import NIOHPACK
import NIOHTTP2

/// How one stream ended.
enum HTTP2StreamResult: Sendable {
    /// A complete answer (HEADERS, and DATA up to END_STREAM).
    case response(HTTP2Response)
    /// The server did not process the stream: `REFUSED_STREAM`, or above a GOAWAY's last stream id.
    case refused
    /// Anything else; the failure says whether the server may have acted.
    case failed(HTTP2Failure)
}

/// A request for a stream of its own, and whom to tell how the stream ended (once, on the
/// connection's event loop).
struct HTTP2StreamStart: Sendable {
    var request: HTTP2Request
    /// How long the stream may wait for its answer once it is open.
    var timeout: TimeAmount
    var ended: @Sendable (HTTP2StreamResult) -> Void
}

/// Every stream of one client connection, kept as frames on the connection itself: no channel per
/// stream. It sits after `NIOHTTP2Handler` (which keeps the protocol's state and flow control) and
/// is touched only on the connection's event loop.
///
/// A stream's request goes out as HEADERS and one DATA frame that ends it, flushed together with
/// the rest of its batch. Every way a stream can end maps to one ``HTTP2StreamResult``, once:
/// - the answer's END_STREAM, on the HEADERS frame or on a later DATA frame, is a response; a
///   `RST_STREAM` after it (RFC 9113 §8.1 lets a server stop a request body it no longer needs)
///   changes nothing;
/// - `REFUSED_STREAM`, or NIO closing the stream because a GOAWAY's last stream id is below it, or
///   HEADERS that never reached the socket, is `refused`;
/// - any other reset, or the connection closing first, is `connectionLost`; the timeout is
///   `timedOut`, and resets the stream (CANCEL) so the slot is given back.
///
/// A stream's slot is given back (`onStreamsClosed`) when NIO has closed the stream too, so the
/// pool's count of open streams never runs ahead of NIO's.
///
/// It also reports the connection-level frames the pool acts on (the peer's SETTINGS and GOAWAY),
/// gives the peer back its flow-control window as answers are read, and keeps the connection
/// honest (``Liveness``): while streams wait, a connection that reads no frame for
/// ``Liveness/silence`` is sent a PING, and is closed if nothing arrives within as long again; an
/// idle one is PINGed every ``Liveness/keepAlive``; one NIO has failed (it wrote a GOAWAY after a
/// protocol error, and decodes nothing further) is closed at once. Closing ends its unanswered
/// streams as `connectionLost`, so the push clients send them again on another connection.
final class HTTP2StreamTable: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Answers longer than this are cut (push services answer with small JSON documents).
    static let bodyLimit = 64 * 1024
    /// The receive window, of the connection and of each stream (HTTP/2's initial 65,535; this
    /// client announces no other). Half of it read, it is given back with a WINDOW_UPDATE.
    static let window = 65_535

    private struct Stream {
        var ended: @Sendable (HTTP2StreamResult) -> Void
        var deadline: NIODeadline
        var status: Int?
        var headers = HPACKHeaders()
        var body: [UInt8] = []
        /// Whether the HEADERS reached the socket; before that, nothing can have been processed.
        var headersWritten = false
        /// The result has been given; the entry stays until NIO closes the stream.
        var finished = false
        var resetSent = false
        /// DATA read on this stream since its window was last given back.
        var unacknowledged = 0
    }

    /// When a connection is checked for signs of life.
    struct Liveness {
        /// While streams wait for answers: no frame read for this long earns a PING, and no frame
        /// for as long again after it closes the connection.
        var silence: TimeAmount
        /// While no stream is open: a PING this often (`nil` for never), answered within `silence`.
        var keepAlive: TimeAmount?
    }

    /// `host[:port]`, the `:authority` of every request.
    private let authority: String
    private let liveness: Liveness
    /// The peer's SETTINGS and GOAWAY, stream ids running out (as a GOAWAY), and the connection closing.
    var onEvent: (HTTP2PoolConnection.Event) -> Void = { _ in }
    /// This many streams are closed, in NIO's count too: their slots are free.
    var onStreamsClosed: (Int) -> Void = { _ in }
    /// A PING was sent (to keep an idle connection, or to ask a silent one whether it lives).
    var onPing: () -> Void = {}
    /// The connection is being closed for the reason given (silent, or failed by NIO).
    var onRetire: (String) -> Void = { _ in }

    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: Stream] = [:]
    /// Streams opened and not yet given their result.
    private var waiting = 0
    private var nextStreamID: HTTP2StreamID = 1
    /// Stream ids are used up: the connection takes no more streams.
    private var exhausted = false
    private var inactive = false
    private var flushScheduled = false
    /// The last stream id of the peer's GOAWAY: streams above it were not processed, however they end.
    private var goAwayLastStreamID: HTTP2StreamID = .maxID
    /// One timer for every stream's timeout, at the earliest deadline of those waiting.
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// Streams the peer has ended (END_STREAM or RST_STREAM), as ``HTTP2FrameGuard`` saw them in
    /// the bytes, until NIO closes them; a DATA frame on them is dropped.
    private var endedByPeer: Set<HTTP2StreamID> = []
    /// The connection's receive window as NIO counts it, and the bytes the peer spent of it that
    /// NIO never saw (DATA frames the guard dropped): the peer's view is the difference.
    private var connectionWindow = HTTP2StreamTable.window
    private var uncountedBytes = 0
    /// A frame has been read since the liveness check last ran.
    private var readSinceCheck = false
    /// The PING sent to a silent or idle connection, while its answer is awaited.
    private var pingOutstanding = false
    private var livenessCheck: Scheduled<Void>?
    private var livenessCheckDeadline: NIODeadline?
    /// Why NIO failed the connection (the error it reported with its GOAWAY), once it has.
    private var failure: (any Error)?
    private var failed = false

    init(authority: String, liveness: Liveness) {
        self.authority = authority
        self.liveness = liveness
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if let keepAlive = liveness.keepAlive { scheduleLivenessCheck(in: keepAlive, context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Opening streams

    /// Opens a stream for each request, in order, and flushes them together.
    func open(_ starts: [HTTP2StreamStart]) {
        guard let context, !inactive else {
            for start in starts { start.ended(.refused) }
            onStreamsClosed(starts.count)
            return
        }
        if waiting == 0 {
            // Waiting starts now: the connection has `silence` to show signs of life.
            readSinceCheck = false
            pingOutstanding = false
            scheduleLivenessCheck(in: liveness.silence, context: context)
        }
        for start in starts { open(start, context: context) }
        flushSoon(context: context)
    }

    /// Flushes once the event loop has run what it has queued: the streams that requests on this
    /// loop open in the same turn (webhooks answered one after another) leave in one TLS write.
    private func flushSoon(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            self.context?.flush()
        }
    }

    private func open(_ start: HTTP2StreamStart, context: ChannelHandlerContext) {
        guard !exhausted else {
            start.ended(.refused)
            onStreamsClosed(1)
            return
        }
        let id = nextStreamID
        if id == .maxID {
            // The last id a client may use (RFC 9113 §5.1.1): the pool must move to a new connection.
            exhausted = true
            onEvent(.goAway(lastStreamID: Int32(Int(id))))
        } else {
            nextStreamID = id.advanced(by: 2)
        }
        let deadline = NIODeadline.now() + start.timeout
        streams[id] = Stream(ended: start.ended, deadline: deadline)
        waiting += 1
        armTimer(at: deadline, context: context)

        let request = start.request
        func indexing(_ name: String) -> HPACKIndexing {
            request.singleUseFields.contains(name) ? .nonIndexable : .indexable
        }
        var fields = HPACKHeaders()
        fields.reserveCapacity(request.headers.count + 4)
        fields.add(name: ":method", value: request.method)
        fields.add(name: ":scheme", value: "https")
        fields.add(name: ":path", value: request.path, indexing: indexing(":path"))
        fields.add(name: ":authority", value: authority)
        for (name, value) in request.headers { fields.add(name: name, value: value, indexing: indexing(name)) }

        // If the HEADERS never reach the socket (the connection closed, a GOAWAY came first, or a
        // reset dropped them from NIO's buffer), the server cannot have seen the request: it is
        // refused, free to send again. NIO never opened such a stream, so its slot is free now.
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenComplete { [self] result in
            switch result {
            case .success:
                streams[id]?.headersWritten = true
            case .failure:
                guard streams[id] != nil else { return }
                finish(id, .refused)
                streams[id] = nil
                endedByPeer.remove(id)
                onStreamsClosed(1)
            }
        }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: fields)))), promise: written)
        let body = context.channel.allocator.buffer(bytes: start.request.body)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: nil)
    }

    // MARK: Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        readSinceCheck = true
        switch frame.payload {
        case .settings(.settings(let settings)):
            // NIO has applied (and acknowledged) these before passing them on.
            onEvent(.settings(maxConcurrentStreams: settings.last { $0.parameter == .maxConcurrentStreams }?.value))
        case .goAway(let lastStreamID, _, _):
            // Seen before NIO reports the streams above it closed, so those are known unprocessed.
            goAwayLastStreamID = min(goAwayLastStreamID, lastStreamID)
            onEvent(.goAway(lastStreamID: Int32(Int(lastStreamID))))
        case .headers(let headers) where streams[id]?.finished == false:
            if let value = headers.headers.first(name: ":status"), let code = Int(value) {
                // An informational (1xx) answer is followed by the real one.
                if code >= 200 || streams[id]!.status == nil { streams[id]!.status = code }
                if code >= 200 { streams[id]!.headers = headers.headers }
            } else {
                // Trailers.
                streams[id]!.headers.add(contentsOf: headers.headers)
            }
            if headers.endStream { complete(id) }
        case .data(let data) where streams[id] != nil:
            if !data.endStream { giveBackStreamWindow(id, read: data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)) }
            guard streams[id]!.finished == false else { return }
            if case .byteBuffer(let buffer) = data.data, streams[id]!.body.count < Self.bodyLimit {
                streams[id]!.body.append(contentsOf: buffer.readableBytesView.prefix(Self.bodyLimit - streams[id]!.body.count))
            }
            if data.endStream { complete(id) }
        default:
            // RST_STREAM is acted on when NIO reports the stream closed, with its code.
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case let closed as StreamClosedEvent:
            streamClosed(closed.streamID, reason: closed.reason)
        case let update as NIOHTTP2WindowUpdatedEvent:
            // The connection's receive window, as NIO counts it (frames it dropped included).
            if update.streamID == .rootStream, let inbound = update.inboundWindowSize {
                connectionWindow = inbound
                replenishConnectionWindow()
            }
        case is NIOHTTP2StreamCreatedEvent:
            break
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failed, failure == nil { failure = error }
        // An error of one stream we wrote to (a frame NIO would not send). Errors of the
        // connection, or of a stream the peer broke, come with a GOAWAY or a reset and end the
        // streams through `channelInactive` or `StreamClosedEvent`.
        if let streamError = error as? NIOHTTP2Errors.StreamError, streams[streamError.streamID]?.finished == false {
            let detail =
                streamError.baseError is NIOHTTP2Errors.CreatedStreamAfterGoaway ? "opened after GOAWAY" : String(describing: streamError.baseError)
            finish(streamError.streamID, lost(streamError.streamID, detail))
            reset(streamError.streamID)
            context.flush()
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        inactive = true
        timer?.cancel()
        timer = nil
        livenessCheck?.cancel()
        livenessCheck = nil
        endedByPeer.removeAll()
        // The pool forgets the connection first, so the streams it sends again go elsewhere.
        onEvent(.closed)
        let open = streams
        streams.removeAll()
        waiting = 0
        for (id, stream) in open where !stream.finished {
            stream.ended(lost(id, headersWritten: stream.headersWritten, "the connection closed before the answer"))
        }
        if !open.isEmpty { onStreamsClosed(open.count) }
        context.fireChannelInactive()
    }

    // MARK: Ending streams

    /// NIO closed the stream (both ends done, a reset either way, or above a GOAWAY's last stream
    /// id): its slot is free.
    private func streamClosed(_ id: HTTP2StreamID, reason: HTTP2ErrorCode?) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        endedByPeer.remove(id)
        if !stream.finished {
            waiting -= 1
            let result: HTTP2StreamResult =
                switch reason {
                case .refusedStream?: .refused
                case let code?: lost(id, headersWritten: stream.headersWritten, "stream reset (\(code))")
                case nil: lost(id, headersWritten: stream.headersWritten, "the stream closed without an answer")
                }
            stream.ended(result)
        }
        onStreamsClosed(1)
    }

    private func complete(_ id: HTTP2StreamID) {
        guard let stream = streams[id] else { return }
        guard let status = stream.status, status >= 200 else {
            finish(id, .failed(HTTP2Failure(.connectionLost, detail: "the stream ended without a final status")))
            return
        }
        finish(id, .response(HTTP2Response(status: status, headers: stream.headers, body: stream.body)))
    }

    /// Gives stream `id` its result, once.
    private func finish(_ id: HTTP2StreamID, _ result: HTTP2StreamResult) {
        guard let ended = streams[id].flatMap({ $0.finished ? nil : $0.ended }) else { return }
        streams[id]!.finished = true
        streams[id]!.body = []
        waiting -= 1
        ended(result)
    }

    private func lost(_ id: HTTP2StreamID, _ detail: String) -> HTTP2StreamResult {
        lost(id, headersWritten: streams[id]?.headersWritten ?? false, detail)
    }

    /// The stream ended without an answer: refused if the server cannot have processed it (the
    /// HEADERS never left, or it is above a GOAWAY's last stream id), else unknown.
    private func lost(_ id: HTTP2StreamID, headersWritten: Bool, _ detail: String) -> HTTP2StreamResult {
        if !headersWritten || id > goAwayLastStreamID { return .refused }
        return .failed(HTTP2Failure(.connectionLost, detail: detail))
    }

    /// Resets stream `id` (CANCEL), once; NIO then reports it closed, or drops it from its buffer.
    private func reset(_ id: HTTP2StreamID) {
        guard let context, streams[id]?.resetSent == false else { return }
        streams[id]!.resetSent = true
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
    }

    // MARK: Timeouts

    private func armTimer(at deadline: NIODeadline, context: ChannelHandlerContext) {
        if let timerDeadline, timerDeadline <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in expire() }
    }

    /// Times out every stream past its deadline, and waits for the next.
    private func expire() {
        timer = nil
        timerDeadline = nil
        guard let context else { return }
        let now = NIODeadline.now()
        var expired: [HTTP2StreamID] = []
        var next: NIODeadline?
        for (id, stream) in streams where !stream.finished {
            if stream.deadline <= now {
                expired.append(id)
            } else if stream.deadline < next ?? .distantFuture {
                next = stream.deadline
            }
        }
        for id in expired {
            finish(id, .failed(HTTP2Failure(.timedOut)))
            reset(id)
        }
        if !expired.isEmpty { context.flush() }
        if let next { armTimer(at: next, context: context) }
    }

    // MARK: Flow control

    private func giveBackStreamWindow(_ id: HTTP2StreamID, read: Int) {
        streams[id]!.unacknowledged += read
        let unacknowledged = streams[id]!.unacknowledged
        guard unacknowledged >= Self.window / 2 else { return }
        streams[id]!.unacknowledged = 0
        windowUpdate(id, increment: unacknowledged)
    }

    /// Tops the connection's receive window up to its full size, as the peer counts it, once
    /// half of it is spent.
    private func replenishConnectionWindow() {
        let peerView = connectionWindow - uncountedBytes
        guard peerView <= Self.window / 2 else { return }
        let increment = Self.window - peerView
        connectionWindow += increment
        windowUpdate(.rootStream, increment: increment)
    }

    private func windowUpdate(_ id: HTTP2StreamID, increment: Int) {
        guard let context, increment > 0 else { return }
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
    }
}

// MARK: - What the frame guard asks and tells

extension HTTP2StreamTable: HTTP2PeerEndedStreams {
    func peerHasEnded(_ id: HTTP2StreamID) -> Bool {
        if endedByPeer.contains(id) { return true }
        // A stream of this client (odd) that was opened and is no longer in the table is closed.
        return Int(id) % 2 == 1 && id < nextStreamID && streams[id] == nil
    }

    func notePeerEnded(_ id: HTTP2StreamID) {
        if streams[id] != nil { endedByPeer.insert(id) }
    }

    func peerSpentUncountedBytes(_ count: Int) {
        guard count > 0 else { return }
        uncountedBytes += count
        replenishConnectionWindow()
    }
}

// MARK: - Liveness

extension HTTP2StreamTable {
    /// NIO wrote a GOAWAY: it met a connection error (a frame it could not accept), reported it
    /// through `errorCaught`, and will decode nothing more of what it had read. Nothing on this
    /// connection can be answered any more, so it closes — once the error has come through.
    func connectionFailedByNIO() {
        guard !failed, let context else { return }
        failed = true
        context.eventLoop.assumeIsolated().execute { [self] in
            guard !inactive else { return }
            retire("the HTTP/2 connection failed: \(failure.map { String(describing: $0) } ?? "GOAWAY sent")")
        }
    }

    private func scheduleLivenessCheck(in delay: TimeAmount, context: ChannelHandlerContext) {
        let deadline = NIODeadline.now() + delay
        if let livenessCheckDeadline, livenessCheckDeadline <= deadline { return }
        livenessCheck?.cancel()
        livenessCheckDeadline = deadline
        livenessCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in checkLiveness() }
    }

    /// Runs every `silence` while streams wait (and every `keepAlive` while none do): a frame read
    /// since the last check is a sign of life; none earns a PING, and none again after the PING
    /// closes the connection.
    private func checkLiveness() {
        livenessCheck = nil
        livenessCheckDeadline = nil
        guard let context, !inactive else { return }
        let busy = waiting > 0
        if readSinceCheck {
            readSinceCheck = false
            pingOutstanding = false
        } else if pingOutstanding {
            retire("no frame within \(liveness.silence.nanoseconds / 1_000_000) ms of a PING")
            return
        } else if busy || liveness.keepAlive != nil {
            ping(context: context)
            scheduleLivenessCheck(in: liveness.silence, context: context)
            return
        }
        if busy {
            scheduleLivenessCheck(in: liveness.silence, context: context)
        } else if let keepAlive = liveness.keepAlive {
            scheduleLivenessCheck(in: keepAlive, context: context)
        }
    }

    private func ping(context: ChannelHandlerContext) {
        pingOutstanding = true
        let ping = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: .random(in: .min ... .max)), ack: false))
        context.writeAndFlush(wrapOutboundOut(ping), promise: nil)
        onPing()
    }

    /// Closes the connection; its streams then end as `connectionLost` (or `refused`, if unsent).
    private func retire(_ reason: String) {
        guard let context, !inactive else { return }
        onRetire(reason)
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension HTTP2StreamTable: Sendable {}

/// Tells the stream table when NIO writes a GOAWAY, which this client never sends itself: NIO
/// does so when the peer broke the protocol in a way that ends the connection.
struct HTTP2GoAwayWatcher: NIOHTTP2FrameDelegate {
    let streams: NIOLoopBound<HTTP2StreamTable>

    func wroteFrame(_ frame: HTTP2Frame) {
        if case .goAway = frame.payload { streams.value.connectionFailedByNIO() }
    }
}
