import Foundation

/// A plain TCP client for hostile input: bytes no HTTP library would send.
enum RawSocket {
    /// What came back: the bytes read, and whether the server closed the connection.
    struct Answer {
        var data: Data
        var closed: Bool
        var text: String { String(decoding: data, as: UTF8.self) }
    }

    /// Connects to 127.0.0.1:`port`, sends `requests` one after another (waiting `pause` between
    /// them) and reads until the server closes or `timeout` passes without a byte.
    static func exchange(port: Int, _ requests: [[UInt8]], pause: Duration = .milliseconds(200), timeout: Duration = .seconds(15)) async throws
        -> Answer
    {
        try await offThePool { try blockingExchange(port: port, requests, pause: pause, timeout: timeout) }
    }

    /// Runs blocking socket work on a thread of its own. On the cooperative threads (two, on two
    /// cores) it would stall the in-process servers that are to answer it, and other tests.
    static func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Sends `head`, then `piece` after `piece` (each `interval` after the last went out whole),
    /// at most `count` of them, until the server closes the connection or `window` passes;
    /// reads all the while. Returns what came back and how many pieces went whole.
    static func pour(port: Int, head: [UInt8], piece: [UInt8], every interval: Duration, count: Int, within window: Duration) async throws
        -> (answer: Answer, pieces: Int)
    {
        try await offThePool {
            let fd = try connected(port: port)
            defer { close(fd) }
            var wait = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var received = Data()
            var buffer = [UInt8](repeating: 0, count: 65536)
            var pending = head
            var pieces = -1
            var next = ContinuousClock.now
            let deadline = next + window
            while ContinuousClock.now < deadline {
                let got = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if got > 0 {
                    received.append(contentsOf: buffer[0..<got])
                    continue
                }
                if got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) { return (Answer(data: received, closed: true), max(pieces, 0)) }
                if pending.isEmpty, pieces < count, ContinuousClock.now >= next { pending = piece }
                guard !pending.isEmpty else {
                    usleep(5_000)
                    continue
                }
                let sent = pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if sent > 0 {
                    pending.removeFirst(sent)
                    if pending.isEmpty {
                        pieces += 1
                        next = ContinuousClock.now + interval
                    }
                } else if errno == EAGAIN || errno == EWOULDBLOCK {
                    usleep(1_000)
                } else {
                    // Closed under the writes: what the server said before is still to be read.
                    while case let got = recv(fd, &buffer, buffer.count, 0), got > 0 { received.append(contentsOf: buffer[0..<got]) }
                    return (Answer(data: received, closed: true), max(pieces, 0))
                }
            }
            return (Answer(data: received, closed: false), max(pieces, 0))
        }
    }

    struct Failure: Error { var step: String }

    /// A socket connected to 127.0.0.1:`port`; with `receiveBuffer`, that SO_RCVBUF set first;
    /// with `maxSegment`, that TCP segment size announced (the server then sizes its send buffer
    /// as it would for a client across the internet, not for loopback's 64 KB segments).
    static func connected(port: Int, receiveBuffer: Int32? = nil, maxSegment: Int32? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(step: "socket") }
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        if var size = maxSegment { setsockopt(fd, Int32(IPPROTO_TCP), TCP_MAXSEG, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            close(fd)
            throw Failure(step: "connect")
        }
        return fd
    }

    private static func blockingExchange(port: Int, _ requests: [[UInt8]], pause: Duration, timeout: Duration) throws -> Answer {
        let fd = try connected(port: port)
        defer { close(fd) }
        var wait = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        for (index, request) in requests.enumerated() {
            if index > 0 { Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18 + Double(pause.components.seconds)) }
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 {
                received.append(contentsOf: buffer[0..<count])
            } else {
                // 0: the server closed; -1: nothing within the timeout (or a reset).
                return Answer(data: received, closed: count == 0 || errno == ECONNRESET)
            }
        }
    }
}
