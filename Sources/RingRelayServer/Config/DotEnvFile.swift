import Foundation

/// A `.env` file, read the way the common dotenv tools (python-dotenv, Node's dotenv, Docker
/// Compose) read one, and refused with its line number where they would disagree or guess.
///
/// - One `NAME=value` a line; blank lines and lines starting with `#` are skipped.
/// - `export NAME=value` is the same as `NAME=value`, so one file serves `source .env` too.
/// - An unquoted value is trimmed, and a `#` after a space or tab starts a comment.
/// - `'single quotes'` keep everything between them as written, `$` included.
/// - `"double quotes"` understand `\n`, `\r`, `\t`, `\"`, `\\` and `\$`.
/// - Refused: a line without `=`, a name that is not `[A-Za-z_][A-Za-z0-9_]*`, an unclosed
///   quote (values are one line), text after a closing quote, and `$NAME` or `${NAME}`, which
///   some of those tools expand and others keep: write the value itself, or single-quote it.
///
/// Errors name the line and the problem, never the value: a `.env` holds secrets.
public struct DotEnvFile: Sendable, Equatable {
    /// The variables, by name; a name given twice keeps its last value.
    public var values: [String: String]

    /// Parses the text of a `.env` file.
    ///
    /// - Parameter path: the file's name, for error messages.
    /// - Throws: ``DotEnvError`` naming the first line it cannot read.
    public init(parsing text: String, path: String = ".env") throws(DotEnvError) {
        values = [:]
        var text = Substring(text)
        if text.first == "\u{FEFF}" { text = text.dropFirst() }
        // "\r\n" is one Character in Swift, so it is a separator of its own.
        let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
        for (index, line) in lines.enumerated() {
            do {
                if let (name, value) = try Self.parse(line) { values[name] = value }
            } catch {
                throw DotEnvError(path: path, line: index + 1, problem: error.problem)
            }
        }
    }

    /// Reads and parses the file at `path`.
    ///
    /// - Returns: `nil` when there is no such file.
    /// - Throws: ``DotEnvError`` when the file cannot be read or parsed.
    public static func read(atPath path: String) throws(DotEnvError) -> DotEnvFile? {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            return nil
        } catch {
            throw DotEnvError(path: path, line: nil, problem: "cannot be read (\(error.localizedDescription)).")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw DotEnvError(path: path, line: nil, problem: "is not UTF-8 text.")
        }
        return try DotEnvFile(parsing: text, path: path)
    }

    private static let blanks = CharacterSet(charactersIn: " \t")

    /// A problem on one line, before the line number is known.
    private struct LineProblem: Error {
        var problem: String
    }

    /// One line's name and value, or `nil` for a blank or comment line.
    private static func parse(_ line: Substring) throws(LineProblem) -> (String, String)? {
        var rest = line.drop(while: \.isBlank)
        if rest.isEmpty || rest.first == "#" { return nil }
        if rest.hasPrefix("export"), let next = rest.dropFirst("export".count).first, next.isBlank {
            rest = rest.dropFirst("export".count).drop(while: \.isBlank)
        }
        guard let equals = rest.firstIndex(of: "=") else {
            throw LineProblem(problem: "expected NAME=value.")
        }
        let name = rest[..<equals].trimmingCharacters(in: Self.blanks)
        guard let first = name.unicodeScalars.first, first == "_" || first.isASCIILetter,
            name.unicodeScalars.allSatisfy({ $0 == "_" || $0.isASCIILetter || ("0"..."9").contains($0) })
        else {
            throw LineProblem(problem: "the name must be letters, digits and '_', not starting with a digit.")
        }
        return (name, try Self.value(rest[rest.index(after: equals)...]))
    }

    /// The value: everything after `=`, with its quotes and comment removed.
    private static func value(_ afterEquals: Substring) throws(LineProblem) -> String {
        let text = afterEquals.drop(while: \.isBlank)
        switch text.first {
        case "'":
            let body = text.dropFirst()
            guard let close = body.firstIndex(of: "'") else { throw LineProblem(problem: "the single quote is not closed on this line.") }
            try requireNothingAfterQuote(body[body.index(after: close)...])
            return String(body[..<close])
        case "\"":
            return try doubleQuoted(text.dropFirst())
        default:
            // Scanned from just after `=`, so that `NAME= # note` is an empty value with a comment.
            var value = ""
            var index = afterEquals.startIndex
            while index < afterEquals.endIndex {
                let character = afterEquals[index]
                if character == "#", index > afterEquals.startIndex, afterEquals[afterEquals.index(before: index)].isBlank { break }
                index = afterEquals.index(after: index)
                if character == "$" { try refuseExpansion(followedBy: afterEquals[index...].first) }
                value.append(character)
            }
            return value.trimmingCharacters(in: Self.blanks)
        }
    }

    /// The text after an opening double quote: escapes resolved, up to the closing quote.
    private static func doubleQuoted(_ text: Substring) throws(LineProblem) -> String {
        let escapes: [Character: Character] = ["n": "\n", "r": "\r", "t": "\t", "\"": "\"", "\\": "\\", "$": "$"]
        var result = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            index = text.index(after: index)
            switch character {
            case "\"":
                try requireNothingAfterQuote(text[index...])
                return result
            case "\\":
                guard index < text.endIndex, let replacement = escapes[text[index]] else {
                    throw LineProblem(problem: "unknown escape in double quotes (known: \\n \\r \\t \\\" \\\\ \\$).")
                }
                result.append(replacement)
                index = text.index(after: index)
            case "$":
                try refuseExpansion(followedBy: text[index...].first)
                result.append(character)
            default:
                result.append(character)
            }
        }
        throw LineProblem(problem: "the double quote is not closed on this line.")
    }

    /// After a closing quote, only blanks and a `#` comment may follow.
    private static func requireNothingAfterQuote(_ rest: Substring) throws(LineProblem) {
        let rest = rest.drop(while: \.isBlank)
        guard rest.isEmpty || rest.first == "#" else {
            throw LineProblem(problem: "unexpected text after the closing quote.")
        }
    }

    /// `$NAME` and `${NAME}` mean different things to different dotenv tools: refused.
    private static func refuseExpansion(followedBy next: Character?) throws(LineProblem) {
        guard let next, next == "{" || next == "_" || (next.isASCII && next.isLetter) else { return }
        throw LineProblem(
            problem: "'$' before a name is expanded by some dotenv tools and kept by others; write the value itself, "
                + "or write \\$ in double quotes, or use single quotes.")
    }
}

/// A `.env` file that cannot be read; names the file and line, never a value.
public struct DotEnvError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file's path as given.
    public var path: String
    /// The 1-based line, or `nil` when the file as a whole cannot be read.
    public var line: Int?
    /// What is wrong.
    public var problem: String

    public var description: String {
        "\(path)\(line.map { " line \($0)" } ?? ""): \(problem)"
    }
}

extension Character {
    /// A space or a tab.
    fileprivate var isBlank: Bool { self == " " || self == "\t" }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}
