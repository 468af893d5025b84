import Foundation
import Hummingbird
import NIOCore
import RingRelayCore
import RingRelayWire

extension Request {
    /// Reads the body as JSON of type `T`, turning every way it can be wrong into a clear 4xx.
    ///
    /// - Throws: ``RingRelayError``: 415 when not `application/json`, 413 over `maxBytes`,
    ///   400 when empty or not strict JSON (RFC 8259, no repeated member names), 422 for a missing,
    ///   mistyped or unknown field.
    func decodeJSON<T: Decodable>(_ type: T.Type, maxBytes: Int) async throws -> T {
        let buffer = try await jsonBody(maxBytes: maxBytes)
        return try Self.decode(type, from: Data(buffer.readableBytesView))
    }

    /// For an operation without a body: none, or an empty JSON object. Anything else is refused as
    /// it would be anywhere: an unknown field 422, bytes that are not JSON 400, more than
    /// `maxBytes` 413. (A body that was never read let any client send a megabyte for nothing.)
    func expectNoBody(maxBytes: Int) async throws {
        if let length = headers[.contentLength].flatMap({ Int($0) }), length > maxBytes { throw Self.tooLarge(maxBytes) }
        let buffer = try await collectBody(maxBytes: maxBytes)
        guard buffer.readableBytesView.contains(where: { !Self.whitespace.contains($0) }) else { return }
        _ = try Self.decode(NoFields.self, from: Data(buffer.readableBytesView))
    }

    private static let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]

    /// An object with no fields.
    private struct NoFields: Decodable {
        private enum Keys: CodingKey, CaseIterable {}
        init(from decoder: any Decoder) throws {
            _ = try decoder.strictContainer(keyedBy: Keys.self)
        }
    }

    /// Checks the media type and size and collects the body.
    func jsonBody(maxBytes: Int) async throws -> ByteBuffer {
        guard let contentType = headers[.contentType], Self.isJSON(contentType) else { throw Self.notJSON }
        if let length = headers[.contentLength].flatMap({ Int($0) }), length > maxBytes {
            throw Self.tooLarge(maxBytes)
        }
        return try await collectBody(maxBytes: maxBytes)
    }

    /// Collects the body, up to `maxBytes`, within the server's ``BodyBudget``: its
    /// `Content-Length`, or `maxBytes` when it does not say, is reserved while it is read.
    func collectBody(maxBytes: Int) async throws -> ByteBuffer {
        let collect = {
            do {
                return try await body.collect(upTo: maxBytes)
            } catch is NIOTooManyBytesError {
                throw Self.tooLarge(maxBytes)
            }
        }
        guard let budget = BodyBudget.current else { return try await collect() }
        return try await budget.reserving(headers[.contentLength].flatMap { Int($0) }.map { min($0, maxBytes) } ?? maxBytes, collect)
    }

    /// The 415 for a body not sent as JSON.
    static let notJSON = RingRelayError(
        .unsupportedMediaType, code: .unsupportedMediaType, "Send the body as JSON with 'Content-Type: application/json'.")

    static func tooLarge(_ maxBytes: Int) -> RingRelayError {
        RingRelayError(.payloadTooLarge, code: .bodyTooLarge, "The request body is larger than \(maxBytes / 1024) KiB.")
    }

    static func isJSON(_ contentType: String) -> Bool {
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        return mediaType == "application/json" || (mediaType.hasPrefix("application/") && mediaType.hasSuffix("+json"))
    }

    /// Decodes JSON, mapping decoding failures to API errors.
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(RingRelayError) -> T {
        guard !data.isEmpty else {
            throw RingRelayError(.badRequest, code: .emptyBody, "The request needs a JSON body.")
        }
        // JSONDecoder alone takes trailing commas and repeated keys (the last one winning).
        do {
            try StrictJSON.validate(data)
        } catch {
            throw RingRelayError(.badRequest, code: .malformedJSON, "The body is not valid JSON: \(error).")
        }
        do {
            return try JSONDecoder.ringRelay.decode(type, from: data)
        } catch let error as UnknownFieldError {
            // The name is the client's text, and can be as long as the body.
            let field = ClientText.echo(error.path.isEmpty ? error.field : "\(error.path).\(error.field)")
            throw RingRelayError(.unprocessable, code: .unknownField, "The field '\(field)' is not part of this request; check its spelling.")
        } catch let error as RingRelayError {
            throw error
        } catch let DecodingError.keyNotFound(key, context) {
            throw .missingField(Self.path(context.codingPath + [key]))
        } catch let DecodingError.typeMismatch(expected, context) {
            if context.codingPath.isEmpty {
                throw RingRelayError(.unprocessable, code: .invalidBody, "The body must be a JSON object.")
            }
            throw .invalidField(Self.path(context.codingPath), "expected \(Self.describe(expected)).")
        } catch let DecodingError.valueNotFound(expected, context) {
            if context.codingPath.isEmpty {
                throw RingRelayError(.unprocessable, code: .invalidBody, "The body must be a JSON object.")
            }
            throw .invalidField(Self.path(context.codingPath), "expected \(Self.describe(expected)), got null.")
        } catch let DecodingError.dataCorrupted(context) where !context.codingPath.isEmpty {
            // Foundation's words (or a type's own decoder's) may quote the value it could not read.
            throw .invalidField(Self.path(context.codingPath), ClientText.echo(context.debugDescription))
        } catch {
            throw RingRelayError(.badRequest, code: .malformedJSON, "The body is not valid JSON.", underlying: error)
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            .joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Double.Type: "a number"
        case is Bool.Type: "true or false"
        default: type is any Collection.Type ? "an array or object" : "a different type"
        }
    }
}

extension Parameters {
    /// A path parameter that the route guarantees.
    func value(_ name: String) -> String {
        get(name) ?? ""
    }
}
