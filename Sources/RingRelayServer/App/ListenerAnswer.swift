import HTTPTypes
import Hummingbird
import RingRelayCore

/// An answer the listener writes by itself, below the router, when a request cannot reach it:
/// the house error body, a request id like every answer's, and `Connection: close`, as the
/// connection closes after it.
struct ListenerAnswer {
    var head: HTTPResponse
    var body: String

    init(_ status: HTTPResponse.Status, code: RingRelayError.Code, _ message: String) {
        body = #"{"error":{"code":"\#(code)","message":"\#(message)"}}"#
        var fields = HTTPFields()
        fields[.contentType] = "application/json; charset=utf-8"
        fields[.contentLength] = String(body.utf8.count)
        fields[.connection] = "close"
        fields[RequestIDs.header] = RequestID().description
        head = HTTPResponse(status: status, headerFields: fields)
    }

    /// For a request the HTTP/1 parser refused (a raw `0xFF` in the request line, a NUL in a header).
    static func unparsable() -> ListenerAnswer {
        ListenerAnswer(.badRequest, code: .invalidRequest, "The request could not be parsed as HTTP/1.1.")
    }

    /// For a body that did not arrive whole within `--body-timeout` of its request's head.
    static func bodyTimeout() -> ListenerAnswer {
        ListenerAnswer(.requestTimeout, code: .requestTimeout, "The request body did not arrive in time; send it whole, then wait for the answer.")
    }
}
