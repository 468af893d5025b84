import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP request, as the SDK makes it.
public struct HTTPRequest: Sendable, Hashable {
    /// `GET`, `POST`, `DELETE`.
    public var method: String
    /// The full URL.
    public var url: URL
    /// Header fields.
    public var headers: [String: String]
    /// The body, if any.
    public var body: Data?

    /// Creates a request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// One HTTP response.
public struct HTTPResponse: Sendable, Hashable {
    /// The status code.
    public var status: Int
    /// The body (empty when there is none).
    public var body: Data

    /// Creates a response.
    public init(status: Int, body: Data = Data()) {
        self.status = status
        self.body = body
    }
}

/// Sends HTTP requests: the seam for REST calls. ``URLSessionHTTPTransport`` is the default;
/// tests use a fake.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the response, whatever its status.
    ///
    /// - Throws: when no response arrived.
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// ``HTTPTransport`` on `URLSession` (FoundationNetworking on Linux).
public struct URLSessionHTTPTransport: HTTPTransport {
    private let session: URLSession

    /// Creates a transport on `session`.
    public init(session: URLSession = .shared) {
        self.session = session
    }

    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for (name, value) in request.headers {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else {
            throw URLError(.badServerResponse)
        }
        return HTTPResponse(status: http.statusCode, body: data)
    }
}
