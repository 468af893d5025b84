import Foundation

/// The README's "Five-minute walk-through", read as the steps ``WalkthroughTests`` runs.
///
/// Only fenced blocks after a marker comment run (GitHub does not show the comments):
/// - `<!-- walkthrough -->` before a `sh` block: the block runs as one unit in the second
///   terminal's shell; a `json` or `text` block right after it (blank lines between at most) is
///   its whole output. Without one, the block must print nothing.
/// - `<!-- walkthrough -->` before a `console` block: each `$ command` runs as a unit there, and
///   the lines up to the next `$` are its whole output.
/// - `<!-- walkthrough: terminal 1 -->` before a `console` block: the first terminal's commands;
///   `ringrelay serve` and `ringrelay simulate` keep running (a new `serve` replaces the running
///   one, as Ctrl-C and a restart would), and their output is what they print until listening.
///
/// In an output, `…` stands for any text within a line, and a line of just `…` for any number
/// of lines. A `\` at the end of a command line continues it on the next.
struct Walkthrough {
    /// Where a unit runs.
    enum Terminal: Equatable {
        /// The first terminal: the server and the simulators.
        case server
        /// The second terminal: one shell session for everything else.
        case shell
    }

    /// One thing to run, and what it must print.
    struct Unit: Equatable {
        var terminal: Terminal
        var command: String
        /// The expected output, `…` as wildcards.
        var output: String
    }

    var units: [Unit]

    /// The walk-through section of `readme`.
    static func section(of readme: String) throws -> Substring {
        guard let start = readme.range(of: "\n## Five-minute walk-through\n") else { throw Problem("no walk-through section") }
        let rest = readme[start.upperBound...]
        return rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)]
    }

    /// Reads the marked blocks of a walk-through section.
    init(_ section: Substring) throws {
        let blocks = Self.blocks(section)
        units = []
        for (index, block) in blocks.enumerated() {
            guard let marker = block.marker else { continue }
            let terminal: Terminal
            switch marker {
            case "walkthrough": terminal = .shell
            case "walkthrough: terminal 1": terminal = .server
            default: throw Problem("unknown marker '\(marker)'")
            }
            switch block.language {
            case "sh" where terminal == .shell:
                let next = blocks.indices.contains(index + 1) ? blocks[index + 1] : nil
                let output = next.flatMap { ["json", "text"].contains($0.language) && $0.followsDirectly ? $0.body : nil } ?? ""
                units.append(Unit(terminal: .shell, command: block.body, output: output))
            case "console":
                units += try Self.commands(block.body).map { Unit(terminal: terminal, command: $0.command, output: $0.output) }
            default:
                throw Problem("a '\(block.language)' block cannot be marked '\(marker)'")
            }
        }
    }

    /// A fenced block, with the marker comment just before it and whether it follows the previous
    /// block with nothing but blank lines between.
    private struct Block {
        var language: String
        var body: String
        var marker: String?
        var followsDirectly: Bool
    }

    private static func blocks(_ section: Substring) -> [Block] {
        var blocks: [Block] = []
        var marker: String?
        var betweenIsBlank = false
        var open: (language: String, lines: [Substring])?
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            if var block = open {
                if line == "```" {
                    blocks.append(
                        Block(language: block.language, body: block.lines.joined(separator: "\n"), marker: marker, followsDirectly: betweenIsBlank))
                    open = nil
                    marker = nil
                    betweenIsBlank = true
                } else {
                    block.lines.append(line)
                    open = block
                }
            } else if line.hasPrefix("```") {
                open = (String(line.dropFirst(3)), [])
            } else if let match = line.wholeMatch(of: /<!-- (walkthrough[^>]*?) -->/) {
                marker = String(match.1)
                betweenIsBlank = false
            } else if !line.allSatisfy(\.isWhitespace) {
                marker = nil
                betweenIsBlank = false
            }
        }
        return blocks
    }

    /// The `$ command` lines of a console block, each with the lines it prints.
    private static func commands(_ body: String) throws -> [(command: String, output: String)] {
        var commands: [(command: String, output: [String])] = []
        var continuing = false
        for line in body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if continuing, var last = commands.popLast() {
                last.command += "\n" + line
                commands.append(last)
            } else if line.hasPrefix("$ ") {
                commands.append((String(line.dropFirst(2)), []))
            } else if var last = commands.popLast() {
                last.output.append(line)
                commands.append(last)
            } else {
                throw Problem("a console block must start with a '$ ' line, got '\(line)'")
            }
            continuing = line.hasSuffix("\\")
        }
        return commands.map { ($0.command, $0.output.joined(separator: "\n")) }
    }

    /// Whether `actual` is what `expected` shows: line by line, `…` matching any text within a
    /// line and a line of just `…` any number of lines. Trailing blanks and blank last lines
    /// do not count.
    static func matches(_ actual: String, expected: String) -> Bool {
        func lines(_ text: String) -> [Substring] {
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
                Substring(String($0.reversed().drop(while: \.isWhitespace).reversed()))
            }
            while lines.last?.isEmpty == true { lines.removeLast() }
            return lines
        }
        func matches(_ actual: ArraySlice<Substring>, _ expected: ArraySlice<Substring>) -> Bool {
            guard let pattern = expected.first else { return actual.isEmpty }
            if pattern == "…" {
                return actual.indices.contains { matches(actual[$0...], expected.dropFirst()) } || matches([], expected.dropFirst())
            }
            guard let line = actual.first, Self.line(line, matches: pattern) else { return false }
            return matches(actual.dropFirst(), expected.dropFirst())
        }
        return matches(lines(actual)[...], lines(expected)[...])
    }

    /// One line against one pattern line, `…` matching any text.
    private static func line(_ line: Substring, matches pattern: Substring) -> Bool {
        let parts = pattern.split(separator: "…", omittingEmptySubsequences: false)
        guard line.hasPrefix(parts[0]) else { return false }
        var rest = line.dropFirst(parts[0].count)
        for (index, part) in parts.enumerated().dropFirst() {
            if index == parts.count - 1 { return rest.hasSuffix(part) }
            guard let found = rest.range(of: part) else { return false }
            rest = rest[found.upperBound...]
        }
        return rest.isEmpty
    }

    struct Problem: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
