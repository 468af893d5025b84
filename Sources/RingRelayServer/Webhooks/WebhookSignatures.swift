import Crypto
import Foundation
import RingRelayCore
import RingRelayWire

/// Twilio's `X-Twilio-Signature`, checked the way Twilio's own `RequestValidator` does.
///
/// The signature is base64 HMAC-SHA1, keyed with the auth token, over the full URL Twilio
/// requested followed, for form posts, by every parameter name and value in sorted order. JSON
/// bodies are covered by a `bodySHA256` query parameter instead. Because Twilio's own signing is
/// inconsistent about default ports, both the URL without its port and with the scheme's default
/// port are accepted.
public enum TwilioSignature {
    /// Whether `signature` is valid for a request.
    ///
    /// - Parameters:
    ///   - url: the URL as Twilio saw it, with its query string.
    ///   - body: the raw body.
    ///   - form: the body's fields (``formFields(_:)``) when it is `application/x-www-form-urlencoded`;
    ///     `nil` for a JSON body, which the URL covers by its hash.
    static func isValid(signature: String, url: String, body: [UInt8], form: [(name: String, value: String)]?, authToken: String) -> Bool {
        var suffix = ""
        if let form {
            suffix = formSuffix(form)
        } else {
            // A JSON body is covered by its hash, carried in the URL Twilio signed.
            // The hash is in the URL for all to see: no secret to compare in constant time.
            guard let expected = queryValue("bodySHA256", in: url), expected.lowercased() == sha256Hex(body)
            else { return false }
        }
        func matches(_ candidate: String) -> Bool {
            Secrets.constantTimeEqual(sign(candidate + suffix, authToken: authToken), signature)
        }
        // The URL as requested first; Twilio may have signed it without its port, or with the
        // default one, so those are tried only when it does not match.
        if matches(url) { return true }
        guard let components = URLComponents(string: url) else { return false }
        return [withoutPort(components), withDefaultPort(components)].contains { $0.map(matches) ?? false }
    }

    /// The URL and `X-Twilio-Signature` Twilio sends a JSON body with: the body's hex SHA-256
    /// added to the URL as `bodySHA256`, and that URL signed. `ringrelay webhook twilio` uses it.
    ///
    /// - Parameter url: the webhook URL, with or without a query of its own.
    public static func signingJSON(_ body: [UInt8], url: String, authToken: String) -> (url: String, signature: String) {
        let signedURL = url + (url.contains("?") ? "&" : "?") + "bodySHA256=" + sha256Hex(body)
        return (signedURL, sign(signedURL, authToken: authToken))
    }

    /// The signature for a string: base64 HMAC-SHA1 keyed with the auth token.
    static func sign(_ text: String, authToken: String) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Array(text.utf8), using: SymmetricKey(data: Array(authToken.utf8)))
        return Data(mac).base64EncodedString()
    }

    /// The first value of the query parameter `name` in `url`, decoded as Twilio's own validator
    /// reads it (Python's `parse_qs`: `+` is a space, `%XX` a byte); `nil` when it is not there.
    /// Read directly, without `URLComponents`, which parsed and validated the whole URL for it on
    /// every webhook.
    static func queryValue(_ name: String, in url: String) -> String? {
        let bytes = Array(url.utf8)
        guard let question = bytes.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        let end = bytes[question...].firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        return formFields(Array(bytes[(question + 1)..<end])).first { $0.name == name }?.value
    }

    /// Sorted `name + value` pairs of a form body's fields; duplicate values are sorted and deduplicated.
    static func formSuffix(_ fields: [(name: String, value: String)]) -> String {
        var values: [String: Set<String>] = [:]
        for (name, value) in fields { values[name, default: []].insert(value) }
        return values.keys.sorted().map { name in values[name, default: []].sorted().map { name + $0 }.joined() }.joined()
    }

    /// The `name=value` fields of an `application/x-www-form-urlencoded` body, decoded, in order.
    static func formFields(_ body: [UInt8]) -> [(name: String, value: String)] {
        body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            return (decodeFormComponent(parts[0]), parts.count > 1 ? decodeFormComponent(parts[1]) : "")
        }
    }

    /// `+` as a space and `%XX` as its byte; a component with a malformed escape, or that does not
    /// decode to UTF-8, stays as it came.
    static func decodeFormComponent(_ bytes: ArraySlice<UInt8>) -> String {
        guard bytes.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "%") }) else {
            return String(decoding: bytes, as: UTF8.self)
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.endIndex, let high = bytes[index + 1].hexDigitValue, let low = bytes[index + 2].hexDigitValue else {
                    return String(decoding: bytes, as: UTF8.self)
                }
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return String(validating: decoded, as: UTF8.self) ?? String(decoding: bytes, as: UTF8.self)
    }

    private static func withoutPort(_ components: URLComponents) -> String? {
        var copy = components
        copy.port = nil
        return copy.string
    }

    private static func withDefaultPort(_ components: URLComponents) -> String? {
        guard components.port == nil else { return nil }
        var copy = components
        copy.port = components.scheme == "https" ? 443 : 80
        return copy.string
    }

    static func sha256Hex(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).hexEncoded
    }
}

/// Webex's `X-Spark-Signature`: lowercase hex HMAC-SHA1 of the raw body, keyed with the webhook secret.
public enum WebexSignature {
    /// Whether `signature` (hex, either case) is the body's signature.
    static func isValid(signature: String, body: [UInt8], secret: String) -> Bool {
        Secrets.constantTimeEqual(Self.signature(of: body, secret: secret), signature.lowercased())
    }

    /// The `X-Spark-Signature` of a body, as Webex sends it; `ringrelay webhook webex` uses it.
    public static func signature(of body: [UInt8], secret: String) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Data(secret.utf8)))
        return Data(mac).hexEncoded
    }
}
