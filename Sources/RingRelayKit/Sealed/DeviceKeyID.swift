import Crypto
import Foundation
import RingRelayWire

/// A device public key's fingerprint: the first 16 bytes of the SHA-256 of its X9.63 form.
///
/// A sealed invite names the recipient's key by it (so a box for an older key is recognised as
/// such) and the caller's key by it (so the callee can look the caller's key up); the trust-on-
/// first-use store remembers keys by it. Written as 32 lowercase hex digits.
public struct DeviceKeyID: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The 16 bytes.
    public let bytes: Data

    /// Length of a key id, in bytes.
    static let byteCount = 16

    /// The fingerprint of `key`.
    public init(of key: P256.KeyAgreement.PublicKey) {
        bytes = Data(SHA256.hash(data: key.x963Representation).prefix(Self.byteCount))
    }

    /// A key id read from an envelope; `nil` unless it is 16 bytes.
    init?(bytes: some DataProtocol) {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = Data(bytes)
    }

    /// The fingerprint of a key as the key directory lists it (base64 X9.63); `nil` when the text
    /// is not a P-256 public key.
    public init?(publicKey base64: String) {
        guard let key = P256.KeyAgreement.PublicKey(base64X963: base64) else { return nil }
        self.init(of: key)
    }

    /// 32 lowercase hex digits.
    public var description: String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let bytes = Data(hex: text), let id = DeviceKeyID(bytes: bytes) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not 32 hex digits"))
        }
        self = id
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension P256.KeyAgreement.PublicKey {
    /// Reads a key as bindings and the key directory carry it: base64 of the 65-byte X9.63 point.
    /// `nil` when it is not base64 or not a point on the curve.
    init?(base64X963 text: String) {
        guard let data = Data(base64Encoded: text), let key = try? Self(x963Representation: data) else { return nil }
        self = key
    }

    /// The key as bindings carry it: base64 of the 65-byte X9.63 point.
    public var base64X963: String { x963Representation.base64EncodedString() }
}

extension Data {
    /// Reads lowercase or uppercase hex digits; `nil` for anything else or an odd count.
    init?(hex text: String) {
        let digits = Array(text.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = digits[index].hexDigitValue, let low = digits[index + 1].hexDigitValue else { return nil }
            bytes.append(high << 4 | low)
        }
        self.init(bytes)
    }
}
