import Foundation
import Synchronization

/// An HTTP/2 server RingRelay did not write, started for a test on a free loopback port: Debian's
/// nginx, or the strict Python `h2` server in `Tests/Interop/strict_h2_server.py`, which plays
/// APNs' connection rules (one stream until the first answer, limits that change, GOAWAY,
/// `REFUSED_STREAM`, resets after the answer) and logs every request it processed.
///
/// `scripts/test` installs both (`nginx-light` from Debian, `h2` from PyPI). Both log what they
/// received, so a test checks delivery at the server, not only at the client. ``InteropDoor``
/// puts other HTTP/2 servers and proxies (HAProxy, nghttpx, h2o, …) in front of this nginx.
///
/// ```swift
/// let server = try await InteropServer.strict(scenario: "goaway")
/// defer { server.stop() }
/// configuration.productionEndpoint = server.url
/// configuration.extraTrustRootsFile = server.caFile
/// ```
public final class InteropServer: Sendable {
    /// `https://127.0.0.1:<port>`.
    public let url: String
    /// The server's certificate (a CA), PEM, to trust.
    public let caFile: String
    private let process: Process
    /// The server's files: certificate, key, configuration, logs; an ``InteropDoor`` puts its
    /// front's files here too, so that one `stop()` removes them all.
    let directory: TemporaryDirectory
    private let logFile: String
    private let kind: Kind
    private let logCount = Mutex<(offset: UInt64, lines: Int)>((0, 0))

    enum Kind {
        case strict
        case nginx
        /// h2o (``InteropDoor``'s `.h2o`), whose access log is written in nginx's format.
        case h2o
    }

    /// One line of the strict server's log.
    public struct Event: Sendable, Hashable {
        /// `request`, `refused`, `dropped_by_goaway`, `dropped_by_close`, `violation`, `connection`, …
        public var event: String
        /// Connection number.
        public var connection: Int?
        /// Stream id.
        public var stream: Int?
        /// `apns-id` of the request.
        public var apnsID: String?
        /// Device or registration token.
        public var token: String?
        /// Status answered.
        public var status: Int?
        /// For violations: what kind.
        public var kind: String?
        /// For requests: the names in the client's HPACK dynamic table after it, newest first.
        public var hpackTable: [String]?
    }

    init(url: String, caFile: String, process: Process, directory: TemporaryDirectory, logFile: String, kind: Kind) {
        self.url = url
        self.caFile = caFile
        self.process = process
        self.directory = directory
        self.logFile = logFile
        self.kind = kind
    }

    /// The strict Python server in `scenario` (`apns`, `response-on-data`, `rst-after-response`,
    /// `refused`, `goaway`, `lower-limit`, `close-mid-burst`, `slow`); `arguments` are passed on
    /// (`--goaway-after 40`, `--expect-key-id KEY`, …).
    public static func strict(scenario: String, arguments: [String] = []) async throws -> InteropServer {
        let directory = try TemporaryDirectory(prefix: "ringrelay-interop")
        let (certFile, keyFile) = try writeCertificate(in: directory)
        let logFile = directory.appending("events.jsonl")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["python3", interopFolder + "/strict_h2_server.py", "--cert", certFile, "--key", keyFile, "--port", "0", "--log", logFile, "--scenario", scenario]
            + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        let line = await firstLine(of: output, timeout: .seconds(20))
        guard let port = line?.split(separator: " ").last.flatMap({ Int($0) }), line?.hasPrefix("LISTENING") == true else {
            process.terminate()
            throw Unavailable(
                "The strict HTTP/2 server did not start (needs python3 with the h2 package: pip install h2; scripts/test installs it). It printed: \(line ?? "nothing")")
        }
        return InteropServer(
            url: "https://127.0.0.1:\(port)", caFile: certFile, process: process, directory: directory, logFile: logFile, kind: .strict)
    }

    /// Debian's nginx, answering `200` to every `POST /3/device/…` (as in the APNs interop
    /// report: `http2_max_concurrent_streams`, `keepalive_requests 100000000`), logging each request.
    public static func nginx(maxConcurrentStreams: Int = 1000) async throws -> InteropServer {
        try await launchNginx(maxConcurrentStreams: maxConcurrentStreams, tlsFront: false).server
    }

    /// Where Debian's `libnginx-mod-stream` puts nginx's `stream {}` module.
    static let nginxStreamModule = "/usr/lib/nginx/modules/ngx_stream_module.so"

    /// nginx as ``nginx(maxConcurrentStreams:)`` starts it; with `tlsFront`, the same nginx also
    /// has a `stream {}` server on a second port that terminates TLS (ALPN `h2` only) and passes
    /// the bytes on to a plain-HTTP/2 (h2c) listener of the same `http {}` server on a Unix
    /// socket, and that port comes back as `frontPort` (``InteropDoor``'s `.nginxTLSFront`).
    static func launchNginx(maxConcurrentStreams: Int, tlsFront: Bool) async throws -> (server: InteropServer, frontPort: Int?) {
        let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else {
            throw Unavailable("nginx is not installed (apt-get install nginx-light; scripts/test installs it).")
        }
        if tlsFront, !FileManager.default.fileExists(atPath: nginxStreamModule) {
            throw Unavailable("nginx's stream module is not installed (apt-get install libnginx-mod-stream; scripts/test installs it).")
        }
        var lastError = ""
        // A free port is found by binding and closing; another process may take it meanwhile, so try a few.
        for _ in 0..<5 {
            let directory = try TemporaryDirectory(prefix: "ringrelay-nginx")
            let (certFile, keyFile) = try writeCertificate(in: directory)
            let port = try freePort()
            var frontPort: Int?
            while tlsFront, frontPort == nil || frontPort == port { frontPort = try freePort() }
            let logFile = directory.appending("access.log")
            let pidFile = directory.appending("nginx.pid")
            let socketFile = directory.appending("h2c.sock")
            // sockaddr_un holds 108 bytes with the terminating zero.
            if tlsFront, socketFile.utf8.count > 107 {
                directory.remove()
                throw Unavailable("the temporary directory's path is too long for a Unix socket: \(socketFile)")
            }
            try FileManager.default.createDirectory(atPath: directory.appending("tmp"), withIntermediateDirectories: true)
            // The stream server is a byte pipe: nginx's HTTP/2 code sees plain h2c from it, with
            // TLS done by other code than on the direct port. Its ALPN offers `h2` alone, as the
            // http listener's would, since the bytes behind it must be HTTP/2.
            let streamBlock =
                tlsFront
                ? """
                stream {
                  server {
                    listen 127.0.0.1:\(frontPort ?? 0) ssl;
                    ssl_certificate \(certFile);
                    ssl_certificate_key \(keyFile);
                    ssl_alpn h2;
                    proxy_pass unix:\(socketFile);
                  }
                }

                """ : ""
            let configuration = """
                \(tlsFront ? "load_module \(nginxStreamModule);\n" : "")worker_processes 1;
                daemon off;
                pid \(pidFile);
                error_log \(directory.appending("error.log")) warn;
                events { worker_connections 4096; }
                \(streamBlock)http {
                  log_format push '$request_uri $http_apns_id $msec';
                  access_log \(logFile) push;
                  client_body_temp_path \(directory.appending("tmp"));
                  proxy_temp_path \(directory.appending("tmp"));
                  fastcgi_temp_path \(directory.appending("tmp"));
                  uwsgi_temp_path \(directory.appending("tmp"));
                  scgi_temp_path \(directory.appending("tmp"));
                  server {
                    listen 127.0.0.1:\(port) ssl http2;
                    \(tlsFront ? "listen unix:\(socketFile) http2;\n    " : "")ssl_certificate \(certFile);
                    ssl_certificate_key \(keyFile);
                    http2_max_concurrent_streams \(maxConcurrentStreams);
                    keepalive_requests 100000000;
                    location /3/device/ { return 200; }
                  }
                }
                """
            let configFile = directory.appending("nginx.conf")
            try Data(configuration.utf8).write(to: URL(fileURLWithPath: configFile))
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["-c", configFile, "-p", directory.path, "-e", directory.appending("error.log")]
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            try runUnblocked(process)
            // nginx runs in the foreground as our child; it is up once its ports take connections
            // (it binds every listener, the Unix socket too, before it starts its worker).
            let ports = [port] + (frontPort.map { [$0] } ?? [])
            let deadline = ContinuousClock.now + .seconds(10)
            while process.isRunning, ContinuousClock.now < deadline, !ports.allSatisfy({ canConnect(port: $0) }) {
                try await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning, ports.allSatisfy({ canConnect(port: $0) }) {
                let server = InteropServer(
                    url: "https://127.0.0.1:\(port)", caFile: certFile, process: process, directory: directory, logFile: logFile,
                    kind: .nginx)
                return (server, frontPort)
            }
            if process.isRunning { process.terminate() }
            lastError = (try? String(contentsOfFile: directory.appending("error.log"), encoding: .utf8)) ?? "no error log"
            directory.remove()
        }
        throw Unavailable("nginx did not start: \(lastError)")
    }

    /// The strict server's log so far.
    public func events() -> [Event] {
        guard let text = try? String(contentsOfFile: logFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let event = object["event"] as? String
            else { return nil }
            return Event(
                event: event, connection: object["conn"] as? Int, stream: object["stream"] as? Int, apnsID: object["apns_id"] as? String,
                token: object["token"] as? String, status: object["status"] as? Int, kind: object["kind"] as? String,
                hpackTable: object["hpack_table"] as? [String])
        }
    }

    /// The requests processed (strict server: `request` events; nginx: access-log lines), by `apns-id`
    /// where there is one, else by token.
    public func processedRequests() -> [String] {
        switch kind {
        case .strict:
            return events().filter { $0.event == "request" }.map { $0.apnsID ?? $0.token ?? "" }
        case .nginx, .h2o:
            return nginxLog().map { $0.apnsID ?? $0.token }
        }
    }

    /// nginx's log: one line per request, `<path> <apns-id or -> <seconds since 1970, to the millisecond>`
    /// (also h2o's, which ``InteropDoor`` has write the same lines).
    public func nginxLog() -> [(token: String, apnsID: String?, at: Double)] {
        guard kind != .strict, let text = try? String(contentsOfFile: logFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[0].hasPrefix("/3/device/"), let at = Double(fields[2]) else { return nil }
            return (String(fields[0].dropFirst("/3/device/".count)), fields[1] == "-" ? nil : String(fields[1]), at)
        }
    }

    /// How many requests nginx has logged, read incrementally (cheap enough to poll every few milliseconds).
    public func loggedRequestCount() -> Int {
        logCount.withLock { state in
            guard let handle = FileHandle(forReadingAtPath: logFile) else { return state.lines }
            defer { try? handle.close() }
            try? handle.seek(toOffset: state.offset)
            let data = handle.readDataToEndOfFile()
            state.offset += UInt64(data.count)
            state.lines += data.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }
            return state.lines
        }
    }

    /// The processed requests once there are at least `count` (or after `timeout`): a server logs
    /// a request after sending its answer, so the client may see the answer first.
    public func processedRequests(atLeast count: Int, timeout: Duration = .seconds(5)) async -> [String] {
        let deadline = ContinuousClock.now + timeout
        var processed = processedRequests()
        while processed.count < count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
            processed = processedRequests()
        }
        return processed
    }

    /// Stops the server and removes its files.
    public func stop() {
        // SIGTERM (nginx's fast shutdown; its worker goes with the master) now, and the files go
        // at once: a server still writing its log writes to an unlinked file, and a clean-up left
        // to a thread would not run when the process (a bench, the test binary) exits first. The
        // wait for the exit and SIGKILL after 5 s run on a thread of their own, so a test's `defer`
        // never holds one of the few cooperative threads the other tests need.
        //
        // nginx deletes its pid file and Unix socket as it exits: when it deletes one the removal
        // is about to, the removal stops there and leaves the rest, so it is tried again, and once
        // more after the exit.
        let process = self.process
        let directory = self.directory
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        for _ in 0..<3 where FileManager.default.fileExists(atPath: directory.path) { directory.remove() }
        Thread.detachNewThread {
            for _ in 0..<250 where process.isRunning { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            directory.remove()
        }
    }

    /// The server could not be started.
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    // MARK: Helpers

    /// `Tests/Interop`, found from this file's place in the repository.
    static var interopFolder: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/Interop").path
    }

    static func writeCertificate(in directory: TemporaryDirectory) throws -> (certificate: String, key: String) {
        let certificate = try SelfSignedCertificate(commonName: "RingRelay interop server")
        let certFile = directory.appending("cert.pem")
        let keyFile = directory.appending("key.pem")
        try Data(certificate.certificatePEM.utf8).write(to: URL(fileURLWithPath: certFile))
        try Data(certificate.privateKeyPEM.utf8).write(to: URL(fileURLWithPath: keyFile))
        // nginx's workers run as nobody and read nothing themselves, but keep the key readable by the master only.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)
        return (certFile, keyFile)
    }

    /// Whether something on 127.0.0.1 takes a TCP connection at `port` (closed again at once).
    public static func canConnect(port: Int) -> Bool {
        withLoopbackSocket(port: port) { fd, address, length in connect(fd, address, length.pointee) == 0 } ?? false
    }

    static func freePort() throws -> Int {
        let port = withLoopbackSocket(port: 0) { fd, address, length -> Int? in
            guard bind(fd, address, length.pointee) == 0, getsockname(fd, address, length) == 0 else { return nil }
            return Int(UInt16(bigEndian: address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }))
        }
        guard let port = port ?? nil else { throw Unavailable("no free loopback port (bind failed)") }
        return port
    }

    /// Starts `process` with no signal blocked. A child starts with the signal mask of the thread
    /// that spawns it, and the threads async code runs on block most signals: nghttpx and h2o
    /// (unlike nginx, HAProxy and our Python servers) never unblock them, so SIGTERM would stay
    /// pending in them for good and `stop()` would leave them running once the test binary exits.
    static func runUnblocked(_ process: Process) throws {
        var none = sigset_t()
        var previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try process.run()
    }

    /// Runs `body` with a new TCP socket and the address 127.0.0.1:`port`, then closes the socket;
    /// `nil` when no socket could be made.
    static func withLoopbackSocket<Result>(
        port: Int, _ body: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Result
    ) -> Result? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body(fd, $0, &length) }
        }
    }

    /// The first line the process prints, read on a thread of its own (a blocking read must not
    /// hold one of the few cooperative threads); `nil` when it exits first or `timeout` passes.
    private static func firstLine(of pipe: Pipe, timeout: Duration) async -> String? {
        let reader = pipe.fileHandleForReading
        let result = ResumeOnce()
        return await withCheckedContinuation { continuation in
            result.pending.withLock { $0 = continuation }
            @Sendable func finish(_ line: String?) {
                result.pending.withLock { pending in
                    pending?.resume(returning: line)
                    pending = nil
                }
            }
            Thread.detachNewThread {
                var text = ""
                while !text.contains("\n") {
                    let data = reader.availableData
                    if data.isEmpty { break }
                    text += String(decoding: data, as: UTF8.self)
                }
                finish(text.split(separator: "\n").first.map(String.init))
            }
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: Double(timeout.components.seconds))
                finish(nil)
            }
        }
    }
}

/// A continuation resumed by whichever of two threads comes first.
private final class ResumeOnce: Sendable {
    let pending = Mutex<CheckedContinuation<String?, Never>?>(nil)
}
