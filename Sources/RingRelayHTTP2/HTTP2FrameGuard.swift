import NIOCore
import NIOHTTP2

/// Takes DATA frames on streams the peer has already ended out of the bytes a connection reads,
/// before `NIOHTTP2Handler` sees them.
///
/// RFC 9113 §5.1 lets an endpoint treat a frame on a closed stream as a connection error, and
/// NIO does: it sends GOAWAY, stops decoding the read it is in, and leaves every answer after that
/// frame unparsed. Servers do send such frames. nginx (1.22 and later) answers an empty response
/// with HEADERS carrying END_STREAM and, when that frame is still in its write queue because the
/// socket was full — as it is behind a byte pipe such as its own `stream` TLS front — also an empty
/// DATA frame with END_STREAM. A DATA frame on an ended stream changes no shared state (unlike
/// HEADERS, whose header block must still be decoded for HPACK), so it is dropped here; the bytes
/// it spent of the connection's flow-control window are given back through
/// ``HTTP2PeerEndedStreams/peerSpentUncountedBytes(_:)``, since NIO never counted them.
///
/// It reads each frame's 9-byte header in place and never copies a read unless it drops something.
/// A frame header split across reads is held back (at most 8 bytes) until it is whole, so a frame
/// is judged before any of it is passed on. Touched only on the connection's event loop.
final class HTTP2FrameGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    static let frameHeaderLength = 9
    private static let data: UInt8 = 0x0
    private static let headers: UInt8 = 0x1
    private static let rstStream: UInt8 = 0x3
    private static let endStream: UInt8 = 0x1

    private let streams: any HTTP2PeerEndedStreams
    /// The start of a frame header that has not fully arrived.
    private var heldHeader: ByteBuffer?
    /// Payload bytes of the current frame still to pass on unread.
    private var passing = 0
    /// Payload bytes of a dropped frame still to skip.
    private var skipping = 0

    init(streams: any HTTP2PeerEndedStreams) {
        self.streams = streams
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var input = unwrapInboundIn(data)
        if var held = heldHeader {
            let missing = Self.frameHeaderLength - held.readableBytes
            guard input.readableBytes >= missing else {
                held.writeBuffer(&input)
                heldHeader = held
                return
            }
            var rest = input.readSlice(length: missing)!
            held.writeBuffer(&rest)
            heldHeader = nil
            let frame = judge(held, at: held.readerIndex)
            if frame.drop {
                skipping = frame.length
            } else {
                passing = frame.length
                context.fireChannelRead(wrapInboundOut(held))
            }
        }
        let end = input.writerIndex
        var index = input.readerIndex
        // The bytes from `kept` up to `index` go on unchanged, as slices of the read: nothing is copied.
        var kept = index
        while index < end {
            if passing > 0 {
                let count = min(passing, end - index)
                passing -= count
                index += count
            } else if skipping > 0 {
                let count = min(skipping, end - index)
                skipping -= count
                index += count
                kept = index
            } else if end - index >= Self.frameHeaderLength {
                let frame = judge(input, at: index)
                if frame.drop {
                    if index > kept { context.fireChannelRead(wrapInboundOut(input.getSlice(at: kept, length: index - kept)!)) }
                    index += Self.frameHeaderLength
                    kept = index
                    skipping = frame.length
                } else {
                    index += Self.frameHeaderLength
                    passing = frame.length
                }
            } else {
                heldHeader = input.getSlice(at: index, length: end - index)
                break
            }
        }
        if index > kept { context.fireChannelRead(wrapInboundOut(input.getSlice(at: kept, length: index - kept)!)) }
    }

    /// Reads the frame header at `index`: its payload length, and whether the frame is dropped.
    /// Notes the streams the peer ends (END_STREAM on DATA or HEADERS, or RST_STREAM) as it goes.
    private func judge(_ buffer: ByteBuffer, at index: Int) -> (length: Int, drop: Bool) {
        let length = Int(buffer.getInteger(at: index, as: UInt8.self)!) << 16 | Int(buffer.getInteger(at: index + 1, as: UInt16.self)!)
        let type = buffer.getInteger(at: index + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: index + 4, as: UInt8.self)!
        let streamID = HTTP2StreamID(Int32(bitPattern: buffer.getInteger(at: index + 5, as: UInt32.self)! & 0x7FFF_FFFF))
        guard streamID != .rootStream else { return (length, false) }
        if type == Self.data, streams.peerHasEnded(streamID) {
            streams.peerSpentUncountedBytes(length)
            return (length, true)
        }
        if type == Self.rstStream || (type == Self.data || type == Self.headers) && flags & Self.endStream != 0 {
            streams.notePeerEnded(streamID)
        }
        return (length, false)
    }
}

@available(*, unavailable)
extension HTTP2FrameGuard: Sendable {}

/// What ``HTTP2FrameGuard`` asks of, and tells, the connection's streams (``HTTP2StreamTable``).
protocol HTTP2PeerEndedStreams: AnyObject {
    /// Whether the peer has ended stream `id` (END_STREAM or RST_STREAM seen, or NIO closed it),
    /// so a DATA frame on it can only be dropped.
    func peerHasEnded(_ id: HTTP2StreamID) -> Bool
    /// The peer ended stream `id`: the guard saw the frame go by, before NIO has processed it.
    func notePeerEnded(_ id: HTTP2StreamID)
    /// The guard dropped a DATA frame whose payload (padding included) was `count` bytes: they
    /// count against the connection's window at the peer, though NIO never saw them.
    func peerSpentUncountedBytes(_ count: Int)
}
