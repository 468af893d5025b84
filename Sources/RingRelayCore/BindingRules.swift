import Crypto
import Foundation

/// The validation rules for binding input, shared by the API and the batch endpoint.
public enum BindingRules {
    /// Largest identity, in UTF-8 bytes (a character can carry kilobytes of combining marks).
    public static let maxIdentityLength = 256
    /// APNs tokens decode to 32–200 bytes (Apple says tokens are variable length; today 32).
    public static let apnsTokenBytes = 32...200
    /// Longest FCM registration token accepted.
    public static let maxFCMTokenLength = 4096
    /// Longest device id, in UTF-8 bytes.
    public static let maxDeviceIDLength = 256

    /// Checks an identity: 1–256 UTF-8 bytes, no control, format (bidi overrides, zero-width
    /// characters) or line-separator characters, which could make log lines and UIs lie.
    public static func validateIdentity(_ identity: String, field: String = "identity") throws(RingRelayError) {
        guard (1...maxIdentityLength).contains(identity.utf8.count) else {
            throw .invalidField(field, "must be 1–\(maxIdentityLength) bytes long as UTF-8.")
        }
        guard isPrintable(identity) else {
            throw .invalidField(field, "must not contain control, format (bidi, zero-width) or line-separator characters.")
        }
    }

    /// Checks a device id: 1–256 UTF-8 bytes of printable characters (as identities).
    public static func validateDeviceID(_ deviceID: String) throws(RingRelayError) {
        guard (1...maxDeviceIDLength).contains(deviceID.utf8.count), isPrintable(deviceID) else {
            throw .invalidField("deviceId", "must be 1–\(maxDeviceIDLength) bytes of printable characters.")
        }
    }

    /// Checks text shown to people, such as a caller's display name: 1–`maxCharacters` characters,
    /// at most `maxBytes` UTF-8 bytes, no control, line-separator or bidi control characters (which
    /// can make a name read as something else). Zero-width joiners stay allowed: emoji need them.
    public static func validateDisplayText(_ text: String, field: String, maxCharacters: Int, maxBytes: Int) throws(RingRelayError) {
        guard (1...maxCharacters).contains(text.count), text.utf8.count <= maxBytes else {
            throw .invalidField(field, "must be 1–\(maxCharacters) characters and at most \(maxBytes) bytes as UTF-8.")
        }
        let refused = text.unicodeScalars.contains { scalar in
            switch scalar.properties.generalCategory {
            case .control, .lineSeparator, .paragraphSeparator: return true
            default: return scalar.properties.isBidiControl
            }
        }
        guard !refused else { throw .invalidField(field, "must not contain control, line-separator or bidi control characters.") }
    }

    /// No control (Cc), format (Cf: bidi controls, zero-width joiners) or separator (Zl, Zp) characters.
    static func isPrintable(_ text: String) -> Bool {
        !text.unicodeScalars.contains { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: true
            default: false
            }
        }
    }

    /// Checks a token for its type and returns it normalised (APNs hex lowercased).
    public static func validateToken(_ token: String, type: BindingType) throws(RingRelayError) -> String {
        if type.isAPNs {
            let utf8 = token.utf8
            guard !utf8.isEmpty, utf8.allSatisfy(\.isHexDigit) else {
                throw .init(.unprocessable, code: .invalidToken, "An APNs token is the device token as hex digits (0-9, a-f).")
            }
            guard utf8.count.isMultiple(of: 2), apnsTokenBytes.contains(utf8.count / 2) else {
                throw .init(
                    .unprocessable, code: .invalidToken,
                    "An APNs token must be an even number of hex digits encoding \(apnsTokenBytes.lowerBound)–\(apnsTokenBytes.upperBound) bytes; this one has \(utf8.count) digits.")
            }
            return token.lowercased()
        }
        // A live binding's token is the device's own id for it: held to the rules of an FCM token.
        let kind = type == .fcm ? "An FCM token" : "A live binding's token"
        guard !token.isEmpty, token.count <= maxFCMTokenLength else {
            throw .init(.unprocessable, code: .invalidToken, "\(kind) must be 1–\(maxFCMTokenLength) characters long.")
        }
        guard token.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F }) else {
            throw .init(.unprocessable, code: .invalidToken, "\(kind) contains only printable ASCII characters, without spaces.")
        }
        return token
    }

    /// Checks a sealed-invite public key: base64 of an uncompressed P-256 point (65 bytes, X9.63)
    /// that lies on the curve: a box sealed to anything else could never be opened.
    public static func validatePublicKey(_ key: String) throws(RingRelayError) {
        guard let data = Data(base64Encoded: key), data.count == 65, data.first == 0x04 else {
            throw .invalidField("publicKey", "must be base64 of an uncompressed P-256 public key (65 bytes, X9.63).")
        }
        guard (try? P256.KeyAgreement.PublicKey(x963Representation: data)) != nil else {
            throw .invalidField("publicKey", "is not a point on the P-256 curve.")
        }
    }
}

extension UInt8 {
    /// Whether the byte is an ASCII hex digit.
    var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
