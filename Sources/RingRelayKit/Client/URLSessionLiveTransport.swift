#if canImport(Darwin)
    import Foundation

    /// ``LiveTransport`` on `URLSessionWebSocketTask` (Apple platforms only: FoundationNetworking's
    /// WebSocket support on Linux is not dependable).
    public struct URLSessionLiveTransport: LiveTransport {
        private let session: URLSession

        /// Creates a transport on `session`.
        public init(session: URLSession = .shared) {
            self.session = session
        }

        public func connect(to url: URL, headers: [String: String]) async throws -> any LiveConnection {
            var request = URLRequest(url: url)
            for (name, value) in headers {
                request.setValue(value, forHTTPHeaderField: name)
            }
            let task = session.webSocketTask(with: request)
            task.resume()
            return URLSessionLiveConnection(task: task)
        }
    }

    /// One `URLSessionWebSocketTask`, read by a task that feeds ``messages``.
    final class URLSessionLiveConnection: LiveConnection {
        let messages: AsyncThrowingStream<String, any Error>
        private let task: URLSessionWebSocketTask

        init(task: URLSessionWebSocketTask) {
            self.task = task
            self.messages = AsyncThrowingStream { continuation in
                let reader = Task {
                    do {
                        while !Task.isCancelled {
                            switch try await task.receive() {
                            case .string(let text): continuation.yield(text)
                            case .data(let data): continuation.yield(String(decoding: data, as: UTF8.self))
                            @unknown default: continue
                            }
                        }
                        continuation.finish()
                    } catch {
                        // A normal closure ends `receive()` with an error too: finish quietly then;
                        // another close code is the server's reason, passed on.
                        switch task.closeCode {
                        case .normalClosure: continuation.finish()
                        case .invalid: continuation.finish(throwing: error)
                        case let code:
                            let reason = task.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? ""
                            continuation.finish(throwing: LiveConnectionClosed(code: UInt16(code.rawValue), reason: reason))
                        }
                    }
                }
                continuation.onTermination = { _ in reader.cancel() }
            }
        }

        func send(_ text: String) async throws {
            try await task.send(.string(text))
        }

        func close() async {
            task.cancel(with: .normalClosure, reason: nil)
        }
    }
#endif
