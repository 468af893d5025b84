import Foundation
import RingRelayWire

/// The REST half of the client: bindings and calls, with the device access token.
struct APIClient: CallSignaling {
    let baseURL: URL
    let deviceId: String?
    let http: any HTTPTransport
    let tokens: AccessTokenCache

    // MARK: CallSignaling

    /// Names `mode` only for a ring group: a call to one identity is the request servers before
    /// ring groups know.
    func createCall(
        to callees: [String], mode: RingMode, media: CallMedia, displayName: String?, avatarURL: URL?, metadata: JSONValue?,
        options: CallOptions
    ) async throws(RingRelayError) -> CallResource {
        let body = CreateCallRequest(
            to: callees, mode: callees.count > 1 ? mode.rawValue : nil, media: media.rawValue, metadata: metadata, displayName: displayName,
            avatarUrl: avatarURL?.absoluteString, ifBusy: options.ifBusy?.rawValue, notifyMissed: options.notifyMissed)
        return try await send("POST", ["v1", "calls"], body: body)
    }

    /// `POST /v1/calls` with a body made by the caller (a sealed call).
    func createCall(_ request: CreateCallRequest) async throws(RingRelayError) -> CallResource {
        try await send("POST", ["v1", "calls"], body: request)
    }

    func deviceKeys(of identity: String) async throws(RingRelayError) -> DeviceKeyList {
        try await send("GET", ["v1", "identities", identity, "keys"])
    }

    func fetchCall(id: String) async throws(RingRelayError) -> CallResource {
        try await send("GET", ["v1", "calls", id])
    }

    func send(_ command: CallCommand, callId: String) async throws(RingRelayError) -> CallResource {
        try await send("POST", ["v1", "calls", callId, command.rawValue])
    }

    // MARK: History

    /// `GET /v1/calls`: one page of this identity's calls, newest first.
    func recentCalls(_ query: CallHistoryQuery) async throws(RingRelayError) -> CallList {
        try decode(try await perform("GET", ["v1", "calls"], query: query.queryItems, body: nil))
    }

    // MARK: Bindings

    func createBinding(_ request: BindingRequest) async throws(RingRelayError) -> BindingResource {
        try await send("POST", ["v1", "bindings"], body: request)
    }

    func deleteBinding(id: String) async throws(RingRelayError) {
        _ = try await perform("DELETE", ["v1", "bindings", id], body: nil)
    }

    // MARK: Requests

    private func send<Response: Decodable>(_ method: String, _ path: [String]) async throws(RingRelayError) -> Response {
        try decode(try await perform(method, path, body: nil))
    }

    private func send<Response: Decodable>(_ method: String, _ path: [String], body: some Encodable) async throws(RingRelayError)
        -> Response
    {
        let data: Data
        do {
            data = try JSONEncoder.ringRelay.encode(body)
        } catch {
            throw .invalidResponse("The request body could not be encoded: \(error)")
        }
        return try decode(try await perform(method, path, body: data))
    }

    private func decode<Response: Decodable>(_ response: HTTPResponse) throws(RingRelayError) -> Response {
        do {
            return try JSONDecoder.ringRelay.decode(Response.self, from: response.body)
        } catch {
            throw .invalidResponse("The \(response.status) answer is not a \(Response.self): \(error)")
        }
    }

    /// Sends a request with the current token, and once more with a fresh token after a 401.
    /// - Returns: a 2xx response.
    private func perform(_ method: String, _ path: [String], query: [URLQueryItem] = [], body: Data?) async throws(RingRelayError)
        -> HTTPResponse
    {
        var url = baseURL
        for component in path { url.append(path: component) }
        if !query.isEmpty { url.append(queryItems: query) }
        var retried = false
        while true {
            let token = try await tokens.current()
            var headers = ["Authorization": "Bearer \(token)", "Accept": "application/json"]
            if body != nil { headers["Content-Type"] = "application/json" }
            let response: HTTPResponse
            do {
                response = try await http.send(HTTPRequest(method: method, url: url, headers: headers, body: body))
            } catch {
                throw .transport("\(method) \(url.path) failed: \(error)")
            }
            if (200..<300).contains(response.status) { return response }
            if response.status == 401, !retried {
                await tokens.invalidate(token)
                retried = true
                continue
            }
            throw .server(Self.serverError(response))
        }
    }

    private static func serverError(_ response: HTTPResponse) -> ServerError {
        if let body = try? JSONDecoder().decode(ErrorBody.self, from: response.body) {
            return ServerError(status: response.status, body: body.error)
        }
        return ServerError(
            status: response.status, code: ServerError.Code(rawValue: "http_\(response.status)"), message: String(decoding: response.body.prefix(200), as: UTF8.self))
    }
}
