/// Text a client sent, repeated in an error message: bounded, whatever was sent.
///
/// A field name, a frame type or a query parameter can be as long as the body or frame that
/// carried it, and one character can carry kilobytes of combining marks, so a cut by characters
/// (`prefix(64)`) bounds nothing. The cut counts UTF-8 bytes and falls between characters, so
/// the echo is never a broken character.
public enum ClientText {
    /// The most UTF-8 bytes of client text an error message repeats (its "…" aside).
    public static let maxEchoBytes = 64

    /// `text` when it is at most ``maxEchoBytes`` as UTF-8; otherwise the characters that fit,
    /// then "…".
    ///
    /// ```swift
    /// ClientText.echo("dance")                               // "dance"
    /// ClientText.echo(String(repeating: "j", count: 15_000)) // 64 "j" and "…"
    /// ```
    public static func echo(_ text: some StringProtocol) -> String {
        guard text.utf8.count > maxEchoBytes else { return String(text) }
        var end = text.startIndex
        while end < text.endIndex {
            let next = text.index(after: end)
            guard text.utf8.distance(from: text.startIndex, to: next) <= maxEchoBytes else { break }
            end = next
        }
        return text[..<end] + "…"
    }
}
