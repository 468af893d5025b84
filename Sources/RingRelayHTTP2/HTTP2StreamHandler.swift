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

/// One request on its own stream: writes HEADERS and DATA (ending the stream) in one flush when
/// the stream opens, and reads the answer back.
///
/// Every way a stream can end maps to one ``HTTP2StreamResult``, once:
/// - the answer's END_STREAM, on the HEADERS frame or on a later DATA frame, is a response; a
///   `RST_STREAM` after it (RFC 9113 §8.1 lets a server stop a request body it no longer needs) changes nothing;
/// - `REFUSED_STREAM`, or NIO closing the stream because a GOAWAY's last stream id is below it, is `refused`;
/// - any other reset, or the connection closing first, is `connectionLost`; the timeout is `timedOut`
///   (and resets the stream, so the slot is given back).
final class HTTP2StreamHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// Answers longer than this are cut (push services answer with small JSON documents).
    static let bodyLimit = 64 * 1024

    private let headers: HPACKHeaders
    private let body: [UInt8]
    private let timeout: TimeAmount
    private let promise: EventLoopPromise<HTTP2StreamResult>
    private var status: Int?
    private var responseHeaders = HPACKHeaders()
    private var responseBody: [UInt8] = []
    private var sent = false
    /// Whether the HEADERS reached the connection; before that, nothing can have been processed.
    private var headersWritten = false
    private var done = false
    private var timer: Scheduled<Void>?

    /// Whether the connection knows this stream was not processed (it is above a GOAWAY's last stream id).
    private let notProcessed: (HTTP2StreamID) -> Bool
    private var streamID: HTTP2StreamID?

    init(
        headers: HPACKHeaders, body: [UInt8], timeout: TimeAmount, promise: EventLoopPromise<HTTP2StreamResult>,
        notProcessed: @escaping (HTTP2StreamID) -> Bool
    ) {
        self.notProcessed = notProcessed
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.promise = promise
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { send(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        send(context: context)
        context.fireChannelActive()
    }

    private func send(context: ChannelHandlerContext) {
        guard !sent else { return }
        sent = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = bound.value
            handler.finish(.failed(HTTP2Failure(.timedOut)))
            // Closing the stream channel resets the stream (CANCEL), which frees its slot.
            context.close(promise: nil)
        }
        // If the HEADERS never go out (the connection closed, or a GOAWAY came first), the server
        // cannot have seen the request: it is refused, free to send again.
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { result in
            switch result {
            case .success:
                let (handler, context) = bound.value
                handler.headersWritten = true
                handler.streamID = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID)
            case .failure: bound.value.0.finish(.refused)
            }
        }
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: written)
        let buffer = context.channel.allocator.buffer(bytes: body)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if let value = frame.headers.first(name: ":status"), let code = Int(value) {
                // An informational (1xx) answer is followed by the real one.
                if code >= 200 || status == nil { status = code }
                if code >= 200 { responseHeaders = frame.headers }
            } else {
                // Trailers.
                responseHeaders.add(contentsOf: frame.headers)
            }
            if frame.endStream { complete() }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data, responseBody.count < Self.bodyLimit {
                responseBody.append(contentsOf: buffer.readableBytesView.prefix(Self.bodyLimit - responseBody.count))
            }
            if frame.endStream { complete() }
        case .rstStream(let code):
            ended(by: code)
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let closed = error as? NIOHTTP2Errors.StreamClosed {
            ended(by: closed.errorCode)
        } else {
            lost(error is NIOHTTP2Errors.CreatedStreamAfterGoaway ? "opened after GOAWAY" : String(describing: error))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        lost("the connection closed before the answer")
        context.fireChannelInactive()
    }

    private func ended(by code: HTTP2ErrorCode) {
        if code == .refusedStream {
            finish(.refused)
        } else {
            lost("stream reset (\(code))")
        }
    }

    /// The stream ended without an answer: refused if the server cannot have processed it (the
    /// HEADERS never left, or it is above a GOAWAY's last stream id), else unknown.
    private func lost(_ detail: String) {
        if !headersWritten || streamID.map(notProcessed) == true {
            finish(.refused)
        } else {
            finish(.failed(HTTP2Failure(.connectionLost, detail: detail)))
        }
    }

    private func complete() {
        guard let status, status >= 200 else {
            finish(.failed(HTTP2Failure(.connectionLost, detail: "the stream ended without a final status")))
            return
        }
        finish(.response(HTTP2Response(status: status, headers: responseHeaders, body: responseBody)))
    }

    private func finish(_ result: HTTP2StreamResult) {
        guard !done else { return }
        done = true
        timer?.cancel()
        promise.succeed(result)
    }
}

@available(*, unavailable)
extension HTTP2StreamHandler: Sendable {}
