import Foundation
import Synchronization

/// The HTTP/2 peers and intermediaries an ``InteropDoor`` puts in front of a test's client. Each
/// ends in a server that answers `200` to every `POST /3/device/…` and logs each request it
/// processed, so a test can check delivery at the far end of the door, not only at the client.
///
/// Each is software RingRelay did not write, installed from Debian by `scripts/test`, with its own
/// TLS stack, HTTP/2 framing, flow-control and flush habits: a client that works against one may
/// still trip on another, and APNs or FCM may sit behind any of them.
public enum InteropDoorKind: String, CaseIterable, Sendable {
    /// nginx's own TLS and HTTP/2 listener, as ``InteropServer/nginx(maxConcurrentStreams:)`` starts it.
    case nginxDirect
    /// nginx's `stream {}` module terminates TLS (ALPN `h2`) and passes the bytes through a Unix
    /// socket to a plain-HTTP/2 (h2c) listener of the same nginx: HTTP/2 behind a byte pipe, with
    /// TLS done apart from the HTTP/2 code, which reads the bytes as the pipe passes them on
    /// rather than a TLS record at a time.
    case nginxTLSFront
    /// HAProxy terminates TLS (ALPN `h2`) in HTTP mode and forwards each stream over HTTP/2 over
    /// TLS to nginx: the client's streams are answered by HAProxy's own HTTP/2 code.
    case haproxy
    /// nghttpx (nghttp2's proxy) terminates TLS (ALPN `h2`) and forwards over HTTP/2 over TLS to nginx.
    case nghttpx
    /// h2o as the HTTP/2 server itself, answering from an mruby handler and logging each request.
    case h2o
    /// `Tests/Interop/chaos_proxy.py`, a TCP proxy in front of nginx's TLS port that passes the
    /// bytes on in pieces of random sizes (1 byte to 64 KiB) with short pauses, both ways, and
    /// can cut every connection at once (``InteropDoor/cutConnections()``).
    case chaos
}

/// One ``InteropDoorKind`` started for a test on free loopback ports: the door the client
/// connects to and, behind it, the sink that counts what was processed (nginx, or h2o for `.h2o`).
///
/// Every door terminates TLS with the certificate ``InteropServer`` makes (its own CA), so a test
/// trusts ``caFile`` whatever the door. The processes print nothing: their output goes to files
/// in the sink's temporary directory, which ``stop()`` removes.
///
/// ```swift
/// for kind in InteropDoorKind.allCases {
///     let door = try await InteropDoor.start(kind)
///     defer { door.stop() }
///     configuration.productionEndpoint = door.url
///     configuration.extraTrustRootsFile = door.caFile
///     // … send, then: await door.processedRequests(atLeast: sent)
/// }
/// ```
public final class InteropDoor: Sendable {
    /// Which door this is.
    public let kind: InteropDoorKind
    /// `https://127.0.0.1:<port>`, the door the client connects to.
    public let url: String
    /// The door's certificate (a CA), PEM, to trust.
    public let caFile: String
    private let sink: InteropServer
    private let front: Front?

    /// A process between the client and the sink: HAProxy, nghttpx or the chaos proxy.
    private final class Front: Sendable {
        let process: Process
        /// The chaos proxy's standard output: `LISTENING <port> SEED <seed>`, then `CUT <n>` per cut.
        let output: OutputLines?
        /// The chaos proxy's seed.
        let seed: UInt64?

        init(process: Process, output: OutputLines? = nil, seed: UInt64? = nil) {
            self.process = process
            self.output = output
            self.seed = seed
        }
    }

    private init(kind: InteropDoorKind, url: String, sink: InteropServer, front: Front?) {
        self.kind = kind
        self.url = url
        self.caFile = sink.caFile
        self.sink = sink
        self.front = front
    }

    /// Starts the door `kind` and what stands behind it.
    ///
    /// - Parameters:
    ///   - maxConcurrentStreams: the `SETTINGS_MAX_CONCURRENT_STREAMS` the client is given, by
    ///     whichever server answers it (nginx, HAProxy, nghttpx or h2o). nginx behind HAProxy or
    ///     nghttpx is given it too; they spread the client's streams over as many connections to
    ///     nginx as that takes.
    ///   - chaosSeed: the chaos proxy's seed (random when `nil`; ``seed`` says which); other doors ignore it.
    /// - Throws: ``InteropServer/Unavailable`` when a program is missing or does not start.
    public static func start(_ kind: InteropDoorKind, maxConcurrentStreams: Int = 1000, chaosSeed: UInt64? = nil) async throws -> InteropDoor {
        switch kind {
        case .nginxDirect:
            let sink = try await InteropServer.nginx(maxConcurrentStreams: maxConcurrentStreams)
            return InteropDoor(kind: kind, url: sink.url, sink: sink, front: nil)
        case .nginxTLSFront:
            let (sink, frontPort) = try await InteropServer.launchNginx(maxConcurrentStreams: maxConcurrentStreams, tlsFront: true)
            return InteropDoor(kind: kind, url: "https://127.0.0.1:\(frontPort ?? 0)", sink: sink, front: nil)
        case .h2o:
            let sink = try await InteropServer.h2o(maxConcurrentStreams: maxConcurrentStreams)
            return InteropDoor(kind: kind, url: sink.url, sink: sink, front: nil)
        case .haproxy, .nghttpx, .chaos:
            let sink = try await InteropServer.nginx(maxConcurrentStreams: maxConcurrentStreams)
            do {
                let (front, port): (Front, Int)
                switch kind {
                case .haproxy: (front, port) = try await haproxy(before: sink, maxConcurrentStreams: maxConcurrentStreams)
                case .nghttpx: (front, port) = try await nghttpx(before: sink, maxConcurrentStreams: maxConcurrentStreams)
                default: (front, port) = try await chaos(before: sink, seed: chaosSeed)
                }
                return InteropDoor(kind: kind, url: "https://127.0.0.1:\(port)", sink: sink, front: front)
            } catch {
                sink.stop()
                throw error
            }
        }
    }

    /// The requests processed at the sink (nginx's access log, or h2o's), by `apns-id` where there
    /// is one, else by token, as ``InteropServer/processedRequests()``.
    public func processedRequests() -> [String] {
        sink.processedRequests()
    }

    /// The processed requests once there are at least `count` (or after `timeout`): the sink logs
    /// a request after sending its answer, so the answer may reach the client, through whatever
    /// stands between, before the line is written.
    public func processedRequests(atLeast count: Int, timeout: Duration = .seconds(5)) async -> [String] {
        await sink.processedRequests(atLeast: count, timeout: timeout)
    }

    /// How many requests the sink has logged, read incrementally (cheap enough to poll every
    /// fraction of a millisecond, as a benchmark's clock does).
    public func loggedRequestCount() -> Int {
        sink.loggedRequestCount()
    }

    /// The chaos proxy's seed (`nil` for other doors): a failure message should print it, since
    /// with it the proxy cuts every connection's bytes into the same sequence of chunk sizes.
    public var seed: UInt64? {
        front?.seed
    }

    /// Chaos door only (it does nothing for the others, and answers 0): cuts every connection
    /// open through the proxy at once, both sides reset, as a path that fails does; connections
    /// made afterwards are accepted as before. Answers how many connections were cut.
    ///
    /// The proxy gets `SIGUSR1` and says when it has cut (`CUT <n>`); this returns after that (in
    /// about a millisecond, at most one second), so the client's next read meets the reset. It
    /// blocks the calling thread that long.
    @discardableResult
    public func cutConnections() -> Int {
        guard kind == .chaos, let front, let output = front.output, front.process.isRunning else { return 0 }
        let before = output.lines(withPrefix: "CUT ").count
        kill(front.process.processIdentifier, SIGUSR1)
        let deadline = ContinuousClock.now + .seconds(1)
        while output.lines(withPrefix: "CUT ").count == before, front.process.isRunning, ContinuousClock.now < deadline {
            usleep(200)
        }
        return output.lines(withPrefix: "CUT ").dropFirst(before).first.flatMap { Int($0.dropFirst(4)) } ?? 0
    }

    /// Stops every process the door started and removes their files.
    public func stop() {
        // The front first, so that it does not spend its last moments reconnecting to a sink that
        // is gone; SIGTERM stops HAProxy, nghttpx (its worker with it) and the chaos proxy at once.
        // As in InteropServer.stop(), the wait and SIGKILL after 5 s run on a thread of their own.
        if let process = front?.process {
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            Thread.detachNewThread {
                for _ in 0..<250 where process.isRunning { usleep(20_000) }
                if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            }
        }
        sink.stop()
    }

    // MARK: Fronts

    /// HAProxy 2.6 in HTTP mode: TLS with ALPN `h2` only in front, HTTP/2 over TLS (verified
    /// against the CA) behind.
    private static func haproxy(before sink: InteropServer, maxConcurrentStreams: Int) async throws -> (Front, Int) {
        guard let binary = installed("haproxy") else {
            throw InteropServer.Unavailable("HAProxy is not installed (apt-get install haproxy; scripts/test installs it).")
        }
        let directory = sink.directory
        // HAProxy wants the certificate and its key in one file.
        let pemFile = directory.appending("haproxy.pem")
        let pem = try String(contentsOfFile: sink.caFile, encoding: .utf8) + String(contentsOfFile: directory.appending("key.pem"), encoding: .utf8)
        try Data(pem.utf8).write(to: URL(fileURLWithPath: pemFile))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: pemFile)
        // HAProxy refuses to start when maxconn needs more descriptors than it may open (about two
        // a connection); a test binary may run with a low limit.
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let maxconn = max(64, min(1000, (Int(clamping: limit.rlim_max) - 100) / 2))
        let configFile = directory.appending("haproxy.cfg")
        let process = try await launchFront(name: "haproxy", binary: binary, in: directory) { port in
            // `proto h2` chooses HTTP/2 towards nginx before the TLS handshake has ended, so a
            // burst of streams shares the connections being opened: with ALPN alone HAProxy cannot
            // reuse a connection until it knows the protocol, and opened one per stream until it
            // ran out of descriptors. `http-reuse always` lets every client connection's streams
            // share them.
            //
            // `option http-buffer-request`: nginx answers `return 200` on the request's HEADERS
            // and then resets the stream with NO_ERROR, the body unread (RFC 9113 §8.1). When that
            // reset reaches HAProxy 2.6 while it is still forwarding the body, HAProxy answers the
            // client REFUSED_STREAM — "not processed, send it again" — for a request nginx has
            // processed: without this option ~4 % of a 5,000-push ring reached nginx twice
            // (2026-12-07, decisions/0008). Buffering the body first, HAProxy sends each request
            // whole, and the reset finds it done.
            let configuration = """
                global
                    maxconn \(maxconn)
                    nbthread 1
                    tune.h2.max-concurrent-streams \(maxConcurrentStreams)
                defaults
                    mode http
                    timeout connect 5s
                    timeout client 10m
                    timeout server 10m
                    timeout http-keep-alive 10m
                frontend door
                    bind 127.0.0.1:\(port) ssl crt \(pemFile) alpn h2
                    default_backend sink
                backend sink
                    http-reuse always
                    option http-buffer-request
                    server nginx 127.0.0.1:\(sink.port) ssl verify required ca-file \(sink.caFile) alpn h2 proto h2

                """
            try Data(configuration.utf8).write(to: URL(fileURLWithPath: configFile))
            return ["-f", configFile, "-db"]
        }
        return (Front(process: process.0), process.1)
    }

    /// nghttpx: TLS with ALPN `h2` only in front, HTTP/2 over TLS (verified against the CA) behind.
    private static func nghttpx(before sink: InteropServer, maxConcurrentStreams: Int) async throws -> (Front, Int) {
        guard let binary = installed("nghttpx") else {
            throw InteropServer.Unavailable("nghttpx is not installed (apt-get install nghttp2-proxy; scripts/test installs it).")
        }
        let directory = sink.directory
        let process = try await launchFront(name: "nghttpx", binary: binary, in: directory) { port in
            // `--conf=/dev/null`: without it nghttpx reads /etc/nghttpx/nghttpx.conf. The backend
            // is named `localhost` in SNI, which the certificate names: nghttpx does not match
            // 127.0.0.1 against the certificate's IP address. `--no-ocsp` keeps it from running
            // its OCSP fetch script.
            [
                "--conf=/dev/null",
                "--frontend=127.0.0.1,\(port)",
                "--backend=127.0.0.1,\(sink.port);;proto=h2;tls;sni=localhost",
                "--cacert=\(sink.caFile)",
                "--npn-list=h2",
                "--workers=1",
                "--frontend-http2-max-concurrent-streams=\(maxConcurrentStreams)",
                "--no-ocsp",
                "--log-level=WARN",
                "--errorlog-file=\(directory.appending("nghttpx-error.log"))",
                directory.appending("key.pem"),
                sink.caFile,
            ]
        }
        return (Front(process: process.0), process.1)
    }

    /// `Tests/Interop/chaos_proxy.py` in front of nginx's TLS port; its first line says its port and seed.
    private static func chaos(before sink: InteropServer, seed: UInt64?) async throws -> (Front, Int) {
        let directory = sink.directory
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            [
                "python3", InteropServer.interopFolder + "/chaos_proxy.py", "--listen-port", "0", "--target", "127.0.0.1:\(sink.port)",
                "--log", directory.appending("chaos.jsonl"),
            ] + (seed.map { ["--seed", String($0)] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        let errors = try outputFile(directory.appending("chaos.out"))
        process.standardError = errors
        try InteropServer.runUnblocked(process)
        try? errors.close()
        let lines = OutputLines(output)
        let line = await lines.first(timeout: .seconds(20), from: process)
        // LISTENING <port> SEED <seed>
        let fields = line?.split(separator: " ") ?? []
        guard fields.count == 4, fields[0] == "LISTENING", let port = Int(fields[1]), let chosen = UInt64(fields[3]) else {
            if process.isRunning { kill(process.processIdentifier, SIGTERM) }
            let errorText = (try? String(contentsOfFile: directory.appending("chaos.out"), encoding: .utf8)) ?? ""
            throw InteropServer.Unavailable("The chaos proxy did not start (needs python3). It printed: \(line ?? "nothing") \(errorText)")
        }
        return (Front(process: process, output: lines, seed: chosen), port)
    }

    /// Starts `binary` with the arguments `arguments` gives for a free port (it may write its
    /// configuration there too), with its standard output and error in `<name>.out` in
    /// `directory`; it is up once it answers TLS on that port (``answersTLS(port:)``). A port
    /// found free may be taken before the program binds it, so one that exits or never answers is
    /// tried again on another.
    static func launchFront(
        name: String, binary: String, in directory: TemporaryDirectory, arguments: (Int) throws -> [String]
    ) async throws -> (Process, Int) {
        let outputPath = directory.appending("\(name).out")
        for _ in 0..<5 {
            let port = try InteropServer.freePort()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = try arguments(port)
            let output = try outputFile(outputPath)
            process.standardOutput = output
            process.standardError = output
            process.standardInput = FileHandle.nullDevice
            try InteropServer.runUnblocked(process)
            try? output.close()
            let deadline = ContinuousClock.now + .seconds(10)
            while process.isRunning, ContinuousClock.now < deadline, !answersTLS(port: port) {
                try await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning, answersTLS(port: port) {
                return (process, port)
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        let printed = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "nothing"
        throw InteropServer.Unavailable("\(name) did not start. It printed: \(printed.suffix(2000))")
    }

    /// Whether what listens on `port` answers a TLS handshake message, within 200 ms: a taken
    /// connection is not enough, since nghttpx's master listens before its worker has started
    /// (and before it has read the certificates), and the kernel takes connections meanwhile.
    /// The message is a handshake record of an unknown type, which a TLS server answers with an
    /// alert or a close, before any HTTP, so no access log gets a line for it.
    static func answersTLS(port: Int) -> Bool {
        let answered = InteropServer.withLoopbackSocket(port: port) { fd, address, length -> Bool in
            var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            guard connect(fd, address, length.pointee) == 0 else { return false }
            let message: [UInt8] = [0x16, 0x03, 0x01, 0x00, 0x04, 0xFF, 0x00, 0x00, 0x00]
            guard send(fd, message, message.count, Int32(MSG_NOSIGNAL)) == message.count else { return false }
            var byte: UInt8 = 0
            let received = recv(fd, &byte, 1, 0)
            // An alert, a close, or a reset: something read the message. A timeout: nothing yet.
            return received >= 0 || errno == ECONNRESET
        }
        return answered ?? false
    }

    /// A file for a process's output, appended to (a retried start keeps the earlier attempts' lines).
    static func outputFile(_ path: String) throws -> FileHandle {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw InteropServer.Unavailable("cannot write \(path)")
        }
        handle.seekToEndOfFile()
        return handle
    }

    /// Where Debian installs `name` (`/usr/sbin` for the daemons), or `nil` when it is not installed.
    static func installed(_ name: String) -> String? {
        ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

extension InteropServer {
    /// The sink's TLS port.
    var port: Int {
        url.split(separator: ":").last.flatMap { Int($0) } ?? 0
    }

    /// Debian's h2o (2.2) as an HTTP/2 server of its own: an mruby handler answers `200` to every
    /// request under `/3/device/`, and the access log has nginx's line for each (`<path> <apns-id
    /// or -> <seconds.milliseconds>`), so `processedRequests()` and `nginxLog()` read it as nginx's.
    /// `stop()`'s SIGTERM is a graceful stop for h2o: with connections open it exits about a second later.
    static func h2o(maxConcurrentStreams: Int) async throws -> InteropServer {
        guard let binary = InteropDoor.installed("h2o") else {
            throw Unavailable("h2o is not installed (apt-get install h2o; scripts/test installs it).")
        }
        let directory = try TemporaryDirectory(prefix: "ringrelay-h2o")
        do {
            let (certFile, keyFile) = try writeCertificate(in: directory)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
            let logFile = directory.appending("access.log")
            let configFile = directory.appending("h2o.conf")
            let (process, port) = try await InteropDoor.launchFront(name: "h2o", binary: binary, in: directory) { port in
                // Started as root, h2o opens its logs and key, then runs as nobody; a pid file
                // would be written after that, into a directory nobody cannot write, so there is
                // none. h2o closes idle HTTP/2 connections after 10 s; 3 minutes is nginx's habit.
                // `ocsp-update-interval: 0` keeps it from running its OCSP fetch script.
                let configuration = """
                    num-threads: 1
                    error-log: \(directory.appending("error.log"))
                    http2-idle-timeout: 180
                    http2-max-concurrent-requests-per-connection: \(maxConcurrentStreams)
                    listen:
                      host: 127.0.0.1
                      port: \(port)
                      ssl:
                        certificate-file: \(certFile)
                        key-file: \(keyFile)
                        ocsp-update-interval: 0
                    hosts:
                      default:
                        access-log:
                          path: \(logFile)
                          format: "%U%q %{apns-id}i %{sec}t.%{msec_frac}t"
                        paths:
                          /3/device/:
                            mruby.handler: |
                              Proc.new do |env|
                                [200, {}, []]
                              end

                    """
                try Data(configuration.utf8).write(to: URL(fileURLWithPath: configFile))
                return ["-c", configFile]
            }
            return InteropServer(
                url: "https://127.0.0.1:\(port)", caFile: certFile, process: process, directory: directory, logFile: logFile, kind: .h2o)
        } catch {
            directory.remove()
            throw error
        }
    }
}

/// A child's standard output, read line by line on a thread of its own (a blocking read must not
/// hold one of the few cooperative threads) until it closes.
private final class OutputLines: Sendable {
    private let state = Mutex<(lines: [String], partial: String)>(([], ""))

    init(_ pipe: Pipe) {
        let reader = pipe.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                state.withLock { state in
                    state.partial += String(decoding: data, as: UTF8.self)
                    while let newline = state.partial.firstIndex(of: "\n") {
                        state.lines.append(String(state.partial[..<newline]))
                        state.partial = String(state.partial[state.partial.index(after: newline)...])
                    }
                }
            }
        }
    }

    /// The first line, once there is one; `nil` once `process` has exited without one, or after `timeout`.
    func first(timeout: Duration, from process: Process) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = state.withLock({ $0.lines.first }) { return line }
            if !process.isRunning {
                // What it printed before it exited may still be in the pipe.
                try? await Task.sleep(for: .milliseconds(50))
                return state.withLock { $0.lines.first }
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    /// The lines so far that begin with `prefix`.
    func lines(withPrefix prefix: String) -> [String] {
        state.withLock { $0.lines.filter { $0.hasPrefix(prefix) } }
    }
}
