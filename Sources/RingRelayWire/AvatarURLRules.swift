import Foundation

/// What a caller's picture (`avatarUrl`) may be: the rule `POST /v1/calls` enforces, and the
/// rule a device applies to what a push or a live event hands it.
///
/// The server and the SDK share it, so a device trusts exactly what the server would have
/// relayed, and nothing a forged or stale push slips in (a `http:` or `file:` URL, a URL with a
/// password in it, text that renders as something else).
public enum AvatarURLRules {
    /// The longest `avatarUrl`, in UTF-8 bytes.
    public static let maxBytes = 1024

    /// Why `text` is not an acceptable avatar URL, worded to follow "must"; `nil` when it is one.
    ///
    /// Acceptable is an absolute `https` URL with a host and without user info
    /// (`user:password@`), at most ``maxBytes`` UTF-8 bytes, without whitespace, control or
    /// format (bidi, zero-width) characters.
    public static func problem(with text: String) -> String? {
        guard text.utf8.count <= maxBytes else { return "must be at most \(maxBytes) bytes as UTF-8." }
        guard !text.unicodeScalars.contains(where: isRefused) else {
            return "must not contain whitespace, control or format (bidi, zero-width) characters."
        }
        guard let components = URLComponents(string: text), components.scheme?.lowercased() == "https" else {
            return "must be an absolute https URL (https://host/path)."
        }
        guard let host = components.host, !host.isEmpty else { return "must name a host (https://host/path)." }
        guard components.user == nil, components.password == nil else { return "must not contain user info (user:password@)." }
        if let port = components.port, !(1...65_535).contains(port) { return "must have a port between 1 and 65535." }
        return nil
    }

    /// The URL `text` names when it passes ``problem(with:)``; `nil` for `nil` or anything else.
    public static func url(_ text: String?) -> URL? {
        guard let text, problem(with: text) == nil else { return nil }
        return URL(string: text)
    }

    /// Whitespace (spaces, tabs, line and paragraph separators), control characters, and format
    /// characters such as bidi overrides and zero-width spaces, which can make a URL read as
    /// another.
    private static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.properties.isWhitespace { return true }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .spaceSeparator: return true
        default: return false
        }
    }
}
