import Crypto
import Foundation
import RingRelayWire

extension JSONValue {
    /// Converts a property list as `JSONSerialization` or PushKit hand it over.
    ///
    /// Returns `nil` when the value is not valid JSON (a key that is not a string, a `Date`, a NaN).
    init?(jsonObject object: Any) {
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object),
            let value = try? JSONDecoder().decode(JSONValue.self, from: data)
        else { return nil }
        self = value
    }

    /// The value as `JSONSerialization` gives it: `[String: Any]`, `[Any]`, `String`, `NSNumber`,
    /// `NSNull`. What CallKit's `reportNewIncomingVoIPPushPayload` and the Twilio and Webex SDKs take.
    public var foundationObject: Any {
        // JSON text of a JSONValue always reads back.
        (try? JSONSerialization.jsonObject(with: canonicalData, options: .fragmentsAllowed)) ?? NSNull()
    }

    /// The value as JSON text with sorted keys: equal values give equal bytes.
    var canonicalData: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a JSONValue cannot fail: it holds nothing but JSON (numbers come from JSON
        // text, so they are finite).
        return (try? encoder.encode(self)) ?? Data()
    }

    /// A short, stable digest of the canonical JSON.
    var digest: String { Data.digestHex(of: canonicalData) }

    /// The member `key`, if this is an object that has it: `payload["bsft"]?["sender"]`.
    public subscript(key: String) -> JSONValue? { objectValue?[key] }
}

extension Data {
    /// The first 16 bytes of the SHA-256 of `data`, as lowercase hex.
    static func digestHex(of data: Data) -> String {
        let digits = Array("0123456789abcdef")
        return String(SHA256.hash(data: data).prefix(16).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
    }
}
