import Foundation

/// A JSON value that keeps object members in the order they were sent, and numbers as the text
/// that was sent, so the FCM simulator can name `message.data[2].value` and quote `12` the way
/// Google's proto-JSON parser does.
indirect enum FCMJSONValue: Sendable {
    case object([(key: String, value: FCMJSONValue)])
    case array([FCMJSONValue])
    case string(String)
    case number(String)
    case bool(Bool)
    case null

    /// The member named `key` of an object.
    subscript(key: String) -> FCMJSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.key == key })?.value
    }

    /// The string, if this is one.
    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The value as compact JSON text (numbers as sent), as Google quotes offending values.
    var jsonText: String {
        switch self {
        case .object(let members):
            "{" + members.map { Self.quote($0.key) + ":" + $0.value.jsonText }.joined(separator: ",") + "}"
        case .array(let items): "[" + items.map(\.jsonText).joined(separator: ",") + "]"
        case .string(let text): Self.quote(text)
        case .number(let text): text
        case .bool(let value): value ? "true" : "false"
        case .null: "null"
        }
    }

    private static func quote(_ text: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: [text], options: [.withoutEscapingSlashes])) ?? Data("[\"\"]".utf8)
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }

    /// Parses UTF-8 JSON; `nil` for anything that is not one well-formed JSON value.
    static func parse(_ bytes: [UInt8]) -> FCMJSONValue? {
        var parser = Parser(bytes: bytes)
        guard let value = parser.value(depth: 0) else { return nil }
        parser.skipWhitespace()
        return parser.index == bytes.count ? value : nil
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        mutating func skipWhitespace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func value(depth: Int) -> FCMJSONValue? {
            guard depth < 64 else { return nil }
            skipWhitespace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"): return object(depth: depth)
            case UInt8(ascii: "["): return array(depth: depth)
            case UInt8(ascii: "\""): return string().map(FCMJSONValue.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return number()
            }
        }

        mutating func literal(_ text: String, _ value: FCMJSONValue) -> FCMJSONValue? {
            let utf8 = Array(text.utf8)
            guard index + utf8.count <= bytes.count, Array(bytes[index..<index + utf8.count]) == utf8 else { return nil }
            index += utf8.count
            return value
        }

        mutating func number() -> FCMJSONValue? {
            let start = index
            while index < bytes.count, "+-0123456789.eE".utf8.contains(bytes[index]) { index += 1 }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            // Let Foundation judge the grammar.
            guard !text.isEmpty, (try? JSONSerialization.jsonObject(with: Data(("[" + text + "]").utf8))) != nil else { return nil }
            return .number(text)
        }

        mutating func string() -> String? {
            let start = index
            index += 1
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    index += 1
                    let literal = Data(bytes[start..<index])
                    guard let decoded = try? JSONSerialization.jsonObject(with: Data("[".utf8) + literal + Data("]".utf8)) as? [String]
                    else { return nil }
                    return decoded.first
                case UInt8(ascii: "\\"):
                    index += 2
                case 0x00..<0x20:
                    return nil
                default:
                    index += 1
                }
            }
            return nil
        }

        mutating func array(depth: Int) -> FCMJSONValue? {
            index += 1
            var items: [FCMJSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                guard let item = value(depth: depth + 1) else { return nil }
                items.append(item)
                skipWhitespace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(items)
                } else {
                    return nil
                }
            }
        }

        mutating func object(depth: Int) -> FCMJSONValue? {
            index += 1
            var members: [(key: String, value: FCMJSONValue)] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\""), let key = string() else { return nil }
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                index += 1
                guard let member = value(depth: depth + 1) else { return nil }
                members.append((key, member))
                skipWhitespace()
                guard index < bytes.count else { return nil }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                } else if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                } else {
                    return nil
                }
            }
        }
    }
}
