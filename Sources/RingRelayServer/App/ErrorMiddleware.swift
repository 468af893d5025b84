import Foundation
import Hummingbird
import Logging
import NIOCore
import RingRelayCore
import RingRelayWire

/// Turns every error into `{"error":{"code","message"}}` with its status. The only place errors
/// become HTTP.
///
/// Unknown errors are defects: they are logged with their cause and answered with a generic 500
/// that reveals nothing.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = RingRelayRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            let mapped = Self.map(error)
            // Refusals for load are the server protecting itself, not failures: counted, not logged each.
            if mapped.kind == .internal || (mapped.kind == .unavailable && !Self.loadRefusals.contains(mapped.code)) {
                context.logger.error(
                    "request failed",
                    metadata: ["error.code": .string(mapped.code), "error.cause": .string("\(error)"), "error.location": .string(mapped.location)])
            } else {
                context.logger.debug("request rejected", metadata: ["error.code": .string(mapped.code)])
            }
            var headers = HTTPFields()
            if mapped.kind == .unauthenticated { headers[.wwwAuthenticate] = "Bearer" }
            if let wait = mapped.retryAfter { headers[.retryAfter] = String(Int(wait.timeInterval.rounded(.up))) }
            return Response.json(status: Self.status(of: mapped.kind), ErrorBody(code: mapped.code, message: mapped.message, state: mapped.state), headers: headers)
        }
    }

    /// The codes of refusals for load (a 503 the client retries after `Retry-After`).
    static let loadRefusals: Set<String> = [RingRelayError.Code.overloaded.rawValue, RingRelayError.Code.serverBusy.rawValue]

    /// The HTTP status of each error kind.
    static func status(of kind: RingRelayError.Kind) -> HTTPResponse.Status {
        switch kind {
        case .badRequest: .badRequest
        case .unauthenticated: .unauthorized
        case .forbidden: .forbidden
        case .notFound: .notFound
        case .conflict: .conflict
        case .payloadTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .unprocessable: .unprocessableContent
        case .rateLimited: .tooManyRequests
        case .unavailable: .serviceUnavailable
        case .internal: .internalServerError
        }
    }

    /// Any error as a ``RingRelayError``.
    static func map(_ error: any Error) -> RingRelayError {
        switch error {
        case let error as RingRelayError:
            return error
        case is NIOTooManyBytesError:
            return RingRelayError(.payloadTooLarge, code: .bodyTooLarge, "The request body is too large.")
        case let error as HTTPError where error.status == .notFound:
            return RingRelayError(.notFound, code: .routeNotFound, "No such endpoint; see GET /openapi.yaml for the API.")
        case let error as HTTPError where (400..<500).contains(error.status.code):
            return RingRelayError(.badRequest, code: .badRequest, error.body ?? "The request could not be read.")
        default:
            return RingRelayError(.internal, code: .internalError, "Something went wrong on our side; the request was not processed. Please retry.", underlying: error)
        }
    }
}

extension Response {
    /// A JSON response in the house encoding.
    static func json(status: HTTPResponse.Status, _ value: some Encodable, headers: HTTPFields = [:]) -> Response {
        let data =
            (try? JSONEncoder.ringRelay.encode(value))
            ?? Data(#"{"error":{"code":"\#(RingRelayError.Code.internalError.rawValue)","message":"encoding failed"}}"#.utf8)
        return json(status: status, body: ByteBuffer(bytes: data), headers: headers)
    }

    /// A JSON response in the house encoding, written by the value itself.
    static func json(status: HTTPResponse.Status, _ value: some JSONTextEncodable, headers: HTTPFields = [:]) -> Response {
        json(status: status, body: ByteBuffer(string: value.jsonText), headers: headers)
    }

    fileprivate static func json(status: HTTPResponse.Status, body: ByteBuffer, headers: HTTPFields) -> Response {
        var headers = headers
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }
}

/// A JSON body with a status, returned by route handlers.
struct JSONResponse<Value: Encodable & Sendable>: ResponseGenerator {
    var status: HTTPResponse.Status
    var value: Value
    /// The body, when the value writes its own JSON text.
    private var text: String?

    init(_ status: HTTPResponse.Status, _ value: Value) {
        self.status = status
        self.value = value
    }

    init(_ value: Value) {
        self.init(.ok, value)
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        if let text { return .json(status: status, body: ByteBuffer(string: text), headers: [:]) }
        return .json(status: status, value)
    }
}

extension JSONResponse where Value: JSONTextEncodable {
    init(_ status: HTTPResponse.Status, _ value: Value) {
        self.status = status
        self.value = value
        text = value.jsonText
    }

    init(_ value: Value) {
        self.init(.ok, value)
    }
}
