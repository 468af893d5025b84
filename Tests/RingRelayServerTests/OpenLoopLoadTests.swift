import NIOCore
import Testing

@testable import RingRelayCLI

/// The open-loop load's answer reading: whole answers by `Content-Length`, however the bytes
/// arrive, one at a time.
@Suite struct OpenLoopLoadTests {
    @Test func answersAreReadByLengthWhateverTheirPieces() {
        let first = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}"
        let second = "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 2\r\n\r\n{}"
        let bytes = Array((first + second).utf8)
        // Every split point: the head, the body or the second answer cut anywhere.
        for split in 0...bytes.count {
            var buffer = ByteBuffer(bytes: bytes[..<split])
            var statuses: [Int] = []
            while let status = OpenLoopHTTP1Load.answer(in: &buffer) { statuses.append(status) }
            buffer.writeBytes(bytes[split...])
            while let status = OpenLoopHTTP1Load.answer(in: &buffer) { statuses.append(status) }
            #expect(statuses == [200, 429], "split at \(split)")
            #expect(buffer.readableBytes == 0, "split at \(split)")
        }
    }

    @Test func anAnswerWithoutALengthIsAFailure() {
        var buffer = ByteBuffer(string: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        #expect(OpenLoopHTTP1Load.answer(in: &buffer) == 0)
        var partial = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}")
        #expect(OpenLoopHTTP1Load.answer(in: &partial) == nil)
    }
}
