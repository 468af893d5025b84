import Foundation

/// Works on JSON as bytes, so provider payloads reach devices exactly as the provider sent them.
///
/// Parsing and re-serialising would reorder keys and change escapes; Webex and Twilio SDKs on the
/// device parse what they receive, and a signature or hash over it must still match.
enum RawJSON {
    /// The exact bytes of the value at `path` (object keys from the top), or `nil` when absent
    /// or when `bytes` is not a JSON object.
    static func value(at path: [String], in bytes: [UInt8]) -> ArraySlice<UInt8>? {
        var scanner = Scanner(bytes: bytes)
        var range = bytes.startIndex..<bytes.endIndex
        for key in path {
            scanner.position = range.lowerBound
            guard let found = scanner.member(key, in: range.upperBound) else { return nil }
            range = found
        }
        return bytes[range]
    }

    /// A JSON object's bytes with `"aps":{}` added when it has no top-level `aps`; otherwise the
    /// bytes unchanged. Returns `nil` when the bytes are not a JSON object.
    static func addingEmptyAPS(to object: ArraySlice<UInt8>) -> [UInt8]? {
        let bytes = Array(object)
        var scanner = Scanner(bytes: bytes)
        scanner.skipWhitespace()
        guard scanner.peek == UInt8(ascii: "{"), let end = scanner.skipValue(), Scanner.isOnlyWhitespace(bytes[end...]) else { return nil }
        scanner.position = 0
        if scanner.member("aps", in: bytes.endIndex) != nil { return bytes }
        // Insert right after the opening brace; add a comma when the object has members.
        var inner = Scanner(bytes: bytes)
        inner.skipWhitespace()
        let brace = inner.position
        inner.position += 1
        inner.skipWhitespace()
        let isEmpty = inner.peek == UInt8(ascii: "}")
        var result = Array(bytes[...brace])
        result.append(contentsOf: Array(#""aps":{}"#.utf8))
        if !isEmpty { result.append(UInt8(ascii: ",")) }
        result.append(contentsOf: bytes[(brace + 1)...])
        return result
    }

    /// A flat JSON object as FCM data: string values as they are, any other value as its JSON text.
    static func stringMap(_ object: [String: Any]) -> [String: String]? {
        var map: [String: String] = [:]
        for (key, value) in object {
            if let text = value as? String {
                map[key] = text
            } else if JSONSerialization.isValidJSONObject([value]),
                let data = try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys, .fragmentsAllowed]),
                let text = String(data: data, encoding: .utf8)
            {
                map[key] = String(text.dropFirst().dropLast())  // the array brackets around the one value
            } else {
                return nil
            }
        }
        return map
    }

    /// A minimal JSON scanner that skips values without building them.
    struct Scanner {
        let bytes: [UInt8]
        var position: Int = 0

        var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

        static func isOnlyWhitespace(_ slice: ArraySlice<UInt8>) -> Bool {
            slice.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        }

        mutating func skipWhitespace() {
            while let byte = peek, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { position += 1 }
        }

        /// Skips one value; returns the index after it, or `nil` on malformed input.
        mutating func skipValue() -> Int? {
            skipWhitespace()
            guard let byte = peek else { return nil }
            switch byte {
            case UInt8(ascii: "\""):
                return skipString()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let close = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                position += 1
                skipWhitespace()
                if peek == close {
                    position += 1
                    return position
                }
                while true {
                    if close == UInt8(ascii: "}") {
                        guard skipString() != nil else { return nil }
                        skipWhitespace()
                        guard peek == UInt8(ascii: ":") else { return nil }
                        position += 1
                    }
                    guard skipValue() != nil else { return nil }
                    skipWhitespace()
                    if peek == close {
                        position += 1
                        return position
                    }
                    guard peek == UInt8(ascii: ",") else { return nil }
                    position += 1
                    skipWhitespace()
                }
            default:
                // Numbers, true, false, null: run to the next delimiter.
                let start = position
                while let next = peek, !Self.isDelimiter(next) { position += 1 }
                return position > start ? position : nil
            }
        }

        static func isDelimiter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ","), UInt8(ascii: ":"),
                UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"), UInt8(ascii: "\""):
                true
            default: false
            }
        }

        /// Whether the quoted JSON string `quoted` spells `key`: compared as bytes unless it
        /// has escapes, which only a decoder reads right.
        static func key(_ quoted: ArraySlice<UInt8>, is key: String) -> Bool {
            let inner = quoted.dropFirst().dropLast()
            guard inner.contains(UInt8(ascii: "\\")) else { return inner.elementsEqual(key.utf8) }
            return (try? JSONDecoder().decode(String.self, from: Data(quoted))) == key
        }

        /// Skips a string starting at the current quote; returns the index after the closing quote.
        mutating func skipString() -> Int? {
            guard peek == UInt8(ascii: "\"") else { return nil }
            position += 1
            while let byte = peek {
                position += 1
                if byte == UInt8(ascii: "\\") {
                    position += 1
                } else if byte == UInt8(ascii: "\"") {
                    return position
                }
            }
            return nil
        }

        /// Finds `key` among the members of the object at the current position (bounded by
        /// `end`) and returns its value's range.
        mutating func member(_ key: String, in end: Int) -> Range<Int>? {
            skipWhitespace()
            guard peek == UInt8(ascii: "{") else { return nil }
            position += 1
            skipWhitespace()
            if peek == UInt8(ascii: "}") { return nil }
            while position < end {
                let keyStart = position
                guard let keyEnd = skipString() else { return nil }
                let matches = Self.key(bytes[keyStart..<keyEnd], is: key)
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { return nil }
                position += 1
                skipWhitespace()
                let valueStart = position
                guard let valueEnd = skipValue() else { return nil }
                if matches { return valueStart..<valueEnd }
                skipWhitespace()
                guard peek == UInt8(ascii: ",") else { return nil }
                position += 1
                skipWhitespace()
            }
            return nil
        }
    }
}
