import Foundation

/// Checks that bytes are one JSON text as RFC 8259 defines it, with no object naming a key twice.
///
/// `JSONDecoder` is lenient where the API promises to be strict: it takes trailing commas, lets a
/// later duplicate key silently win, skips a byte order mark, and reads raw control characters in
/// strings. Request bodies go through this check first. It is one pass over the bytes that builds
/// nothing but the name sets of open objects: about a third of what the decoding that follows
/// costs (1 µs for a binding's body, 0.6 ms for a batch of 500).
///
/// ```swift
/// try StrictJSON.validate(Data(#"{"identity":"bob",}"#.utf8))  // throws: a trailing comma before '}' (byte 17)
/// ```
public enum StrictJSON {
    /// Deepest nesting of arrays and objects accepted, as `JSONDecoder`'s own limit.
    public static let maximumDepth = 512

    /// Checks `bytes`.
    ///
    /// - Throws: ``JSONSyntaxError`` naming the first problem and where it is.
    public static func validate(_ bytes: some ContiguousBytes) throws(JSONSyntaxError) {
        let problem = bytes.withUnsafeBytes { raw in
            var validator = Validator(bytes: raw.bindMemory(to: UInt8.self))
            return validator.run()
        }
        if let problem { throw problem }
    }

    /// Checks `bytes` as ``validate(_:)`` does and, when they are an object whose members are all
    /// strings, returns those members with their escapes resolved: the one pass a flat provider
    /// notification needs, instead of a check and then `JSONSerialization`.
    ///
    /// - Returns: the members, or `nil` for any other JSON text (an array, a number, an object with
    ///   a member that is not a string).
    /// - Throws: ``JSONSyntaxError`` naming the first problem and where it is.
    public static func stringMembers(_ bytes: some ContiguousBytes) throws(JSONSyntaxError) -> [String: String]? {
        let outcome = bytes.withUnsafeBytes { raw in
            var validator = Validator(bytes: raw.bindMemory(to: UInt8.self), collectingMembers: true)
            return validator.run().map { Result<[String: String]?, JSONSyntaxError>.failure($0) } ?? .success(validator.members)
        }
        return try outcome.get()
    }
}

/// What makes a text not strict JSON, and where.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The byte offset of the problem.
    public var offset: Int
    /// What is wrong, e.g. "a trailing comma before '}'".
    public var problem: String

    public var description: String { "\(problem) (byte \(offset))" }
}

/// The scanner behind ``StrictJSON``: iterative, so nesting depth never grows the call stack.
private struct Validator {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    /// The top-level object's members while every one so far is a string (when collecting them);
    /// `nil` otherwise.
    private(set) var members: [String: String]?
    /// The name of the top-level object's member being read.
    private var memberName: [UInt8] = []

    init(bytes: UnsafeBufferPointer<UInt8>, collectingMembers: Bool = false) {
        self.bytes = bytes
        if collectingMembers { members = [:] }
    }

    mutating func run() -> JSONSyntaxError? {
        do {
            try document()
            return nil
        } catch {
            return error
        }
    }

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func fail(_ problem: String, at offset: Int? = nil) -> JSONSyntaxError {
        JSONSyntaxError(offset: offset ?? index, problem: problem)
    }

    private var unexpectedEnd: JSONSyntaxError { fail("the text ends in the middle of a value") }

    private mutating func skipWhitespace() {
        while let byte = peek, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }

    private mutating func document() throws(JSONSyntaxError) {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            throw fail("a byte order mark; send UTF-8 without one")
        }
        skipWhitespace()
        guard index < bytes.count else { throw fail("no JSON value") }
        if bytes[index] != UInt8(ascii: "{") { members = nil }
        try value()
        skipWhitespace()
        if let byte = peek { throw fail("\(Self.describe(byte)) after the JSON value") }
    }

    /// Reads one value with everything nested in it. Open containers are kept on explicit stacks:
    /// `closers` holds each one's closing byte, `keys` the names each open object has used.
    private mutating func value() throws(JSONSyntaxError) {
        var closers: [UInt8] = []
        var keys: [MemberNames] = []
        while true {
            // A value starts here.
            skipWhitespace()
            guard let byte = peek else { throw unexpectedEnd }
            // A member of the top-level object: only strings are collected.
            let isMember = members != nil && closers.count == 1
            if isMember, byte != UInt8(ascii: "\"") { members = nil }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard closers.count < StrictJSON.maximumDepth else {
                    throw fail("more than \(StrictJSON.maximumDepth) levels of nesting")
                }
                let closer = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                index += 1
                skipWhitespace()
                if peek == closer {
                    index += 1
                } else {
                    closers.append(closer)
                    if closer == UInt8(ascii: "}") {
                        keys.append(MemberNames())
                        try readMemberName(into: &keys[keys.count - 1])
                    }
                    continue
                }
            case UInt8(ascii: "\""):
                if isMember {
                    let text = try string(decoding: true) ?? []
                    members?[String(decoding: memberName, as: UTF8.self)] = String(decoding: text, as: UTF8.self)
                } else {
                    _ = try string(decoding: false)
                }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            default: throw fail("\(Self.describe(byte)) where a value should start")
            }
            // A value ended: close what it ends, until a comma asks for the next one.
            nextValue: while let closer = closers.last {
                skipWhitespace()
                guard let byte = peek else { throw unexpectedEnd }
                switch byte {
                case UInt8(ascii: ","):
                    let comma = index
                    index += 1
                    skipWhitespace()
                    if peek == closer { throw fail("a trailing comma before '\(Character(UnicodeScalar(closer)))'", at: comma) }
                    if closer == UInt8(ascii: "}") { try readMemberName(into: &keys[keys.count - 1]) }
                    break nextValue
                case closer:
                    index += 1
                    closers.removeLast()
                    if closer == UInt8(ascii: "}") { keys.removeLast() }
                default:
                    throw fail("\(Self.describe(byte)) where ',' or '\(Character(UnicodeScalar(closer)))' should be")
                }
            }
            if closers.isEmpty { return }
        }
    }

    /// The member names one object has used: compared one by one while they are few, as in nearly
    /// every body (hashing each name was 0.7 % of a webhook's CPU), and hashed beyond that, so an
    /// object with thousands of members still costs linear time.
    struct MemberNames {
        private var few: [[UInt8]] = []
        private var many: Set<[UInt8]>?

        /// Adds `name`; `false` when the object has used it already.
        mutating func insert(_ name: [UInt8]) -> Bool {
            if many != nil { return many!.insert(name).inserted }
            guard !few.contains(name) else { return false }
            few.append(name)
            if few.count > 16 {
                many = Set(few)
                few = []
            }
            return true
        }
    }

    /// Reads an object member's name and its colon; the name must be new to the object.
    private mutating func readMemberName(into names: inout MemberNames) throws(JSONSyntaxError) {
        let start = index
        guard let quote = peek else { throw unexpectedEnd }
        guard quote == UInt8(ascii: "\"") else { throw fail("\(Self.describe(quote)) where a member name in double quotes should be") }
        let name = try string(decoding: true) ?? []
        guard names.insert(name) else {
            throw fail("the member name '\(ClientText.echo(String(decoding: name, as: UTF8.self)))' twice in one object", at: start)
        }
        if members != nil { memberName = name }
        skipWhitespace()
        guard let colon = peek else { throw unexpectedEnd }
        guard colon == UInt8(ascii: ":") else { throw fail("\(Self.describe(colon)) where ':' should be") }
        index += 1
    }

    /// Reads a string from its opening quote. With `decoding`, returns its text as UTF-8, escapes
    /// resolved (member names are compared that way, code unit by code unit).
    private mutating func string(decoding: Bool) throws(JSONSyntaxError) -> [UInt8]? {
        let start = index
        index += 1
        var decoded: [UInt8] = []
        var plainStart = index
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                if decoding { decoded.append(contentsOf: bytes[plainStart..<index]) }
                index += 1
                return decoding ? decoded : nil
            case UInt8(ascii: "\\"):
                if decoding { decoded.append(contentsOf: bytes[plainStart..<index]) }
                try escape(into: &decoded, decoding: decoding)
                plainStart = index
            case 0..<0x20:
                throw fail("a control character in a string; escape it (\\n, \\t, \\u00XX)")
            case 0x80...:
                try utf8Sequence()
            default:
                index += 1
            }
        }
        throw fail("a string without its closing quote", at: start)
    }

    /// Reads an escape from its backslash; with `decoding`, appends what it stands for to `decoded`.
    private mutating func escape(into decoded: inout [UInt8], decoding: Bool) throws(JSONSyntaxError) {
        let start = index
        index += 1
        guard let byte = peek else { throw unexpectedEnd }
        index += 1
        let simple: UInt8? =
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): byte
            case UInt8(ascii: "b"): 0x08
            case UInt8(ascii: "f"): 0x0C
            case UInt8(ascii: "n"): 0x0A
            case UInt8(ascii: "r"): 0x0D
            case UInt8(ascii: "t"): 0x09
            default: nil
            }
        if let simple {
            if decoding { decoded.append(simple) }
            return
        }
        guard byte == UInt8(ascii: "u") else { throw fail("the escape '\\\(Self.printable(byte))', which JSON does not have", at: start) }
        var scalar = try hexUnit()
        switch scalar {
        case 0xD800...0xDBFF:
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw fail("a lone surrogate escape", at: start)
            }
            index += 2
            let low = try hexUnit()
            guard (0xDC00...0xDFFF).contains(low) else { throw fail("a lone surrogate escape", at: start) }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        case 0xDC00...0xDFFF:
            throw fail("a lone surrogate escape", at: start)
        default:
            break
        }
        if decoding, let unicode = Unicode.Scalar(scalar) {
            decoded.append(contentsOf: String(Character(unicode)).utf8)
        }
    }

    /// Reads the four hex digits of a `\u` escape.
    private mutating func hexUnit() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw unexpectedEnd }
        var unit: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = bytes[index].hexDigitValue.map(UInt32.init) else {
                throw fail("\(Self.describe(bytes[index])) in a \\u escape, which needs four hex digits")
            }
            unit = unit << 4 | digit
            index += 1
        }
        return unit
    }


    /// Reads one UTF-8 encoded character from its lead byte, refusing what RFC 3629 refuses
    /// (overlong forms, surrogates, code points past U+10FFFF).
    private mutating func utf8Sequence() throws(JSONSyntaxError) {
        let lead = bytes[index]
        let (continuations, secondRange): (Int, ClosedRange<UInt8>) =
            switch lead {
            case 0xC2...0xDF: (1, 0x80...0xBF)
            case 0xE0: (2, 0xA0...0xBF)
            case 0xE1...0xEC, 0xEE...0xEF: (2, 0x80...0xBF)
            case 0xED: (2, 0x80...0x9F)
            case 0xF0: (3, 0x90...0xBF)
            case 0xF1...0xF3: (3, 0x80...0xBF)
            case 0xF4: (3, 0x80...0x8F)
            default: (0, 0...0)
            }
        guard continuations > 0, index + continuations < bytes.count, secondRange.contains(bytes[index + 1]),
            bytes[(index + 2)..<(index + 1 + continuations)].allSatisfy({ (0x80...0xBF).contains($0) })
        else { throw fail("bytes that are not UTF-8") }
        index += 1 + continuations
    }

    /// Reads a number: `-`, no leading zeros, digits after `.` and in an exponent.
    private mutating func number() throws(JSONSyntaxError) {
        if peek == UInt8(ascii: "-") { index += 1 }
        if peek == UInt8(ascii: "0") {
            index += 1
            if let byte = peek, Self.isDigit(byte) { throw fail("a number with a leading zero") }
        } else {
            guard digits() else { throw fail("a '-' without digits") }
        }
        if peek == UInt8(ascii: ".") {
            index += 1
            guard digits() else { throw fail("a number without digits after '.'") }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            index += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
            guard digits() else { throw fail("a number without digits in its exponent") }
        }
    }

    /// Skips a run of digits; whether there was one.
    private mutating func digits() -> Bool {
        let start = index
        while let byte = peek, Self.isDigit(byte) { index += 1 }
        return index > start
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard index + expected.count <= bytes.count, bytes[index..<(index + expected.count)].elementsEqual(expected) else {
            throw fail("a word that is not a value where a value should start; JSON has only true, false and null")
        }
        index += expected.count
    }

    /// A byte for a message: `'x'` when printable ASCII, else `byte 0xNN`.
    private static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(UnicodeScalar(byte)))'" : "byte 0x\(String(byte, radix: 16, uppercase: true))"
    }

    private static func printable(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? String(Character(UnicodeScalar(byte))) : "<0x\(String(byte, radix: 16, uppercase: true))>"
    }
}
