import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Bounds how the requests of an HTTP connection are read once its first request is past the
/// WebSocket upgrade check (it is one of Hummingbird's `additionalChannelHandlers`, which an
/// upgraded connection never gets):
///
/// - **A body arrives whole within `bodyTimeout` of its request's head**, or the connection is
///   closed, answered `408 request_timeout` when nothing was answered yet. Hummingbird's idle
///   timeout restarts with every piece of a body, so a client sending a byte now and then held a
///   connection for ever.
/// - **Once a request is answered, at most ``maxDrainBytes`` more of its body are read** before
///   the connection is closed. Hummingbird reads an unread body to its end to get to the next
///   request, with no limit of its own: a refused request with a huge `Content-Length` was read
///   to the end.
/// - **A later request the HTTP/1 parser refuses gets `400 invalid_request`**, as a first one does
///   (``UnparsableRequestGuard``), after the answer being written; then the connection closes.
///   (Hummingbird's own answer is a bare 400.) It is logged as the first one is, through
///   ``ParserRefusals``.
///
/// Lean on the hot path: a request whose head and body come in one read costs a clock read; one
/// whose body spans reads, one timer at most per connection, however many requests it carries.
final class RequestReadGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The most body bytes read after the request was answered.
    static let maxDrainBytes = 64 * 1024

    private let bodyTimeout: TimeAmount
    /// Where refused requests are logged, at most once a minute.
    private let refusals: ParserRefusals
    /// While a request's body is being read: when it must be whole.
    private var bodyDeadline: NIODeadline?
    /// Requests read (their heads) whose answers have not ended.
    private var unanswered = 0
    /// Whether an answer has begun and not ended.
    private var answering = false
    /// Body bytes read since the request being read was answered; `nil` until it is.
    private var drained: Int?
    /// A refused request waits for the answers before it to end.
    private var refusalWaits = false
    /// This guard answered and the connection is closing: Hummingbird's answers are dropped,
    /// and so is whatever the client still sends.
    private var closing = false
    private var timer: Scheduled<Void>?

    init(bodyTimeout: TimeAmount, refusals: ParserRefusals) {
        self.bodyTimeout = bodyTimeout
        self.refusals = refusals
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        switch unwrapInboundIn(data) {
        case .head:
            unanswered += 1
            bodyDeadline = .now() + bodyTimeout
            drained = nil
        case .body(let piece):
            if let drained {
                guard drained + piece.readableBytes <= Self.maxDrainBytes else { return context.close(promise: nil) }
                self.drained = drained + piece.readableBytes
            }
        case .end:
            bodyDeadline = nil
            drained = nil
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Only a body that did not come whole in this read needs a timer.
        if let deadline = bodyDeadline, timer == nil { schedule(at: deadline, context) }
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !closing else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(let head):
            if head.status.kind != .informational { answering = true }
        case .body:
            break
        case .end:
            answering = false
            unanswered = max(unanswered - 1, 0)
            // Answered before its body was read whole: what follows is only drained.
            if bodyDeadline != nil, unanswered == 0 { drained = 0 }
        }
        context.write(data, promise: promise)
        if refusalWaits, !answering, waitingAnswers == 0 { answer(.unparsable(), context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        guard !closing else { return }
        refusals.record(error)
        if drained != nil {
            // The request was answered already; a second answer would be one too many.
            context.close(promise: nil)
        } else if answering || waitingAnswers > 0 {
            refusalWaits = true
        } else {
            answer(.unparsable(), context)
        }
    }

    /// Requests read whole whose answers have not ended (the one being read aside).
    private var waitingAnswers: Int {
        unanswered - (bodyDeadline == nil ? 0 : 1)
    }

    private func schedule(at deadline: NIODeadline, _ context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            timer = nil
            // The body was read whole meanwhile, or a later request's body is being read.
            guard let current = bodyDeadline else { return }
            guard current <= .now() else { return schedule(at: current, context) }
            if drained == nil, !answering, waitingAnswers == 0 {
                answer(.bodyTimeout(), context)
            } else {
                context.close(promise: nil)
            }
        }
    }

    /// Writes `answer` in place of Hummingbird's and closes the connection once it is written.
    private func answer(_ answer: ListenerAnswer, _ context: ChannelHandlerContext) {
        closing = true
        timer?.cancel()
        context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(string: answer.body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}

@available(*, unavailable)
extension RequestReadGuard: Sendable {}
