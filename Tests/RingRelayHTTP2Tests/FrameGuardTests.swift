import NIOCore
import NIOEmbedded
import NIOHTTP2
import RingRelayTesting
import Testing

@testable import RingRelayHTTP2

/// ``HTTP2FrameGuard`` on byte streams cut at every kind of boundary: it passes every frame it
/// keeps byte for byte and in order, drops exactly the DATA frames on streams the peer has ended,
/// and reports the bytes those frames spent of the connection's window.
@Suite struct FrameGuardTests {
    /// Streams as the stream table would know them: `open` ones are in the table.
    final class Ledger: HTTP2PeerEndedStreams {
        var open: Set<Int>
        var ended: Set<Int> = []
        var uncounted = 0
        init(open: Set<Int>) { self.open = open }
        func peerHasEnded(_ id: HTTP2StreamID) -> Bool { ended.contains(Int(id)) || !open.contains(Int(id)) }
        func notePeerEnded(_ id: HTTP2StreamID) { if open.contains(Int(id)) { ended.insert(Int(id)) } }
        func peerSpentUncountedBytes(_ count: Int) { uncounted += count }
    }

    static func frame(type: UInt8, flags: UInt8, stream: Int, payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// A server's answers to streams 1, 3, 5, 7, 9, as nginx sends them behind a byte pipe: HEADERS
    /// with END_STREAM, then (the slip) an empty DATA with END_STREAM, some with a RST_STREAM between;
    /// a DATA with a body on a stream the table no longer holds; connection frames between.
    static func answers() -> (bytes: [UInt8], kept: [UInt8], droppedPayload: Int) {
        var bytes: [UInt8] = []
        var kept: [UInt8] = []
        var dropped = 0
        func add(_ frame: [UInt8], keep: Bool) {
            bytes += frame
            if keep { kept += frame } else { dropped += frame.count - 9 }
        }
        add(frame(type: 0x4, flags: 0, stream: 0, payload: [0, 3, 0, 0, 3, 0xE8]), keep: true)  // SETTINGS
        for stream in [1, 3, 5, 7] {
            add(frame(type: 0x1, flags: 0x5, stream: stream, payload: [0x88]), keep: true)  // HEADERS :status 200, END_STREAM
            if stream == 5 { add(frame(type: 0x3, flags: 0, stream: stream, payload: [0, 0, 0, 0]), keep: true) }  // RST_STREAM(NO_ERROR)
            add(frame(type: 0x0, flags: 0x1, stream: stream, payload: []), keep: false)  // DATA, END_STREAM, on an ended stream
        }
        // A stream answered in two parts: HEADERS, then DATA with END_STREAM (kept).
        add(frame(type: 0x1, flags: 0x4, stream: 9, payload: [0x88]), keep: true)
        add(frame(type: 0x0, flags: 0x1, stream: 9, payload: Array("{\"ok\":1}".utf8)), keep: true)
        // A padded DATA frame with a body on a stream long gone (11 is not in the table).
        add(frame(type: 0x0, flags: 0x9, stream: 11, payload: [4] + Array(repeating: 0x61, count: 300) + [0, 0, 0, 0]), keep: false)
        add(frame(type: 0x6, flags: 0, stream: 0, payload: Array(repeating: 7, count: 8)), keep: true)  // PING
        return (bytes, kept, dropped)
    }

    @Test(arguments: 0..<200) func keepsEveryOtherByteWhateverTheReadBoundaries(seed: Int) throws {
        let (bytes, kept, dropped) = Self.answers()
        let ledger = Ledger(open: [1, 3, 5, 7, 9])
        let channel = EmbeddedChannel(handler: HTTP2FrameGuard(streams: ledger))
        var random = SeededGenerator(seed: UInt64(seed))
        var index = 0
        while index < bytes.count {
            // Reads of 1 byte up to the whole rest, small ones common.
            let size = min(bytes.count - index, seed == 0 ? bytes.count : 1 << Int.random(in: 0...9, using: &random))
            try channel.writeInbound(channel.allocator.buffer(bytes: bytes[index..<(index + size)]))
            index += size
        }
        var passed: [UInt8] = []
        while let buffer = try channel.readInbound(as: ByteBuffer.self) { passed += buffer.readableBytesView }
        #expect(passed == kept, "seed \(seed)")
        #expect(ledger.uncounted == dropped)
        #expect(try channel.finish().isClean)
    }
}
