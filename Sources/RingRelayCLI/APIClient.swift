import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFoundationEssentialsCompat
import NIOHTTP1
import RingRelayWire

/// Where the admin verbs send their requests, and with which token.
struct ServerOptions: ParsableArguments {
    @Option(help: "Server URL. [env: RINGRELAY_URL] (default: http://127.0.0.1:8080)")
    var server: String?

    @Option(help: "Bearer token: the admin token for 'accounts', an account API key for 'bindings' and 'calls'. [env: RINGRELAY_TOKEN, or RINGRELAY_ADMIN_TOKEN for 'accounts']")
    var token: String?

    @Flag(help: "Print the server's JSON instead of a table.")
    var json = false

    /// A client for these options; `tokenVariables` are consulted in order when `--token` is absent.
    func client(tokenVariables: [String]) throws -> APIClient {
        let environment = ProcessInfo.processInfo.environment
        guard let token = token ?? tokenVariables.lazy.compactMap({ environment[$0] }).first else {
            throw ValidationError("Pass --token or set \(tokenVariables.joined(separator: " or ")).")
        }
        return APIClient(baseURL: try baseURL(), token: token)
    }

    /// The server URL, from `--server`, `RINGRELAY_URL` or the default, without a trailing `/`.
    func baseURL() throws -> String {
        let base = server ?? ProcessInfo.processInfo.environment["RINGRELAY_URL"] ?? "http://127.0.0.1:8080"
        guard let url = URL(string: base), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ValidationError("--server must be an http(s) URL, got '\(base)'.")
        }
        return base.hasSuffix("/") ? String(base.dropLast()) : base
    }
}

/// A failed API call, printed as the server's error code and message.
struct APIError: Error, CustomStringConvertible {
    var status: Int
    var code: String
    var message: String
    var description: String { "error (\(status) \(code)): \(message)" }
}

/// No answer from the server: said once, in plain words, with what to check.
struct ServerConnectionFailure: Error, CustomStringConvertible {
    /// The server URL that was tried.
    var server: String
    /// What went wrong.
    var problem: ConnectionProblem

    /// - Parameter error: what the HTTP client threw; only its plain cause is kept.
    init(server: String, error: any Error) {
        self.server = server
        problem = ConnectionProblem(error)
    }

    var description: String { problem.sentence(server: server) }
}

/// A minimal JSON client for the RingRelay API.
struct APIClient {
    var baseURL: String
    /// The bearer token; `nil` for the provider webhooks, which are signed instead.
    var token: String?

    /// The process's HTTP client. Unlike `HTTPClient.shared`, it gives up on a refused
    /// connection at once instead of retrying it until the request's deadline, so a verb
    /// aimed at a server that is down says so in a moment, not in 30 s.
    static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Sends a request and returns the raw response body, throwing ``APIError`` for non-2xx answers.
    func send(_ method: HTTPMethod, _ path: String, body: (some Encodable)? = Optional<String>.none) async throws -> Data {
        try await send(method, path, json: body.map { try JSONEncoder.ringRelay.encode($0) })
    }

    /// Sends JSON bytes as they are, with `headers` besides the usual ones (a webhook's signature).
    func send(_ method: HTTPMethod, _ path: String, json: Data?, headers: HTTPHeaders = [:]) async throws -> Data {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        request.headers = headers
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        request.headers.add(name: "Accept", value: "application/json")
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(data: json))
        }
        let response: HTTPClientResponse
        do {
            response = try await Self.http.execute(request, timeout: .seconds(30))
        } catch {
            throw ServerConnectionFailure(server: baseURL, error: error)
        }
        let data = Data(buffer: try await response.body.collect(upTo: 16 * 1024 * 1024))
        guard (200..<300).contains(response.status.code) else {
            let detail = try? JSONDecoder.ringRelay.decode(ErrorBody.self, from: data).error
            throw APIError(
                status: Int(response.status.code), code: detail?.code ?? "http_error",
                message: detail?.message ?? String(decoding: data, as: UTF8.self))
        }
        return data
    }

    /// Sends a request and decodes the JSON answer.
    func send<Answer: Decodable>(_ method: HTTPMethod, _ path: String, body: (some Encodable)? = Optional<String>.none, as: Answer.Type) async throws -> (Answer, Data) {
        let data = try await send(method, path, body: body)
        return (try JSONDecoder.ringRelay.decode(Answer.self, from: data), data)
    }
}

/// Runs an API action, turning ``APIError`` and ``ServerConnectionFailure`` into a message on
/// stderr and exit status 1.
func reportingAPIErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as APIError {
        printError(error.description)
        throw ExitCode.failure
    } catch let error as ServerConnectionFailure {
        printError(error.description)
        throw ExitCode.failure
    }
}

/// Prints rows as left-aligned columns.
func printTable(_ header: [String], _ rows: [[String]]) {
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    for row in [header] + rows {
        print(zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
            .trimmingCharacters(in: .whitespaces))
    }
}

/// Prints raw JSON bytes followed by a newline.
func printJSON(_ data: Data) {
    print(String(decoding: data, as: UTF8.self))
}

extension String {
    /// Percent-encodes a value for a URL query or path segment.
    var urlEncoded: String {
        addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? self
    }
}
