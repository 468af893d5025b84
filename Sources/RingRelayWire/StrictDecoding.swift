import Foundation

/// Thrown while decoding a request body that carries a field the API does not know.
///
/// Rejecting unknown fields turns a client's typo (`"enviroment"`) into a clear error instead of a
/// silently ignored value.
public struct UnknownFieldError: Error, Sendable, Hashable {
    /// The unknown field's name.
    public var field: String
    /// Dotted path of the object holding it (empty at the top level).
    public var path: String
}

/// A coding key for any string, used to see every key of an object.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}

extension Decoder {
    /// A keyed container that first checks the object has no keys outside `Keys`.
    ///
    /// - Throws: ``UnknownFieldError`` naming the first unknown key.
    public func strictContainer<Keys: CodingKey & CaseIterable>(keyedBy type: Keys.Type) throws -> KeyedDecodingContainer<Keys> {
        let all = try container(keyedBy: AnyCodingKey.self)
        let known = Set(Keys.allCases.map(\.stringValue))
        if let unknown = all.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
            throw UnknownFieldError(field: unknown, path: codingPath.map(\.stringValue).joined(separator: "."))
        }
        return try container(keyedBy: Keys.self)
    }
}

extension JSONEncoder {
    /// The encoder for every RingRelay body: RFC 3339 dates, stable key order.
    public static var ringRelay: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

extension JSONDecoder {
    /// The decoder for every RingRelay body: RFC 3339 dates.
    public static var ringRelay: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
