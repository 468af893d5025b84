import Foundation

/// Generates prefixed, time-ordered identifiers such as `bnd_01JD3…`.
///
/// The part after the prefix is 26 Crockford base-32 characters: 48 bits of milliseconds since
/// the Unix epoch, then 80 random bits (the ULID layout). Identifiers therefore sort by creation
/// time as plain strings, which keeps keyset pagination in creation order without a second column.
public enum ResourceID {
    /// Prefix of account ids.
    public static let account = "acc"
    /// Prefix of API key ids.
    public static let apiKey = "key"
    /// Prefix of binding ids.
    public static let binding = "bnd"
    /// Prefix of call ids.
    public static let call = "call"
    /// Prefix of delivery ids.
    public static let delivery = "dlv"
    /// Prefix of live-connection event ids.
    public static let event = "evt"

    static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)

    /// Makes a new identifier with the given prefix, ordered by `date`.
    public static func make(_ prefix: String, at date: Date = Date()) -> String {
        let millis = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded())) & 0xFFFF_FFFF_FFFF
        let (high, low) = RandomBits.shared.next80()
        // 128 bits: 48 time | 16 random | 64 random, emitted 5 bits at a time from the top.
        let upper = (millis << 16) | UInt64(high)
        var chars = [UInt8]()
        chars.reserveCapacity(prefix.utf8.count + 27)
        chars.append(contentsOf: prefix.utf8)
        chars.append(UInt8(ascii: "_"))
        for index in 0..<26 {
            let bitOffset = 128 - 5 * (index + 1)  // may go negative for the last (3-bit) group
            let value: UInt64
            if bitOffset >= 64 {
                value = upper >> UInt64(bitOffset - 64)
            } else if bitOffset > -5 && bitOffset < 0 {
                value = low << UInt64(-bitOffset)
            } else if bitOffset > 59 {
                value = (upper << UInt64(64 - bitOffset)) | (low >> UInt64(bitOffset))
            } else {
                value = low >> UInt64(bitOffset)
            }
            chars.append(alphabet[Int(value & 0x1F)])
        }
        return String(decoding: chars, as: UTF8.self)
    }

    /// Whether `id` has the shape of an identifier with `prefix`.
    public static func isValid(_ id: String, prefix: String) -> Bool {
        let utf8 = Array(id.utf8)
        guard utf8.count == prefix.utf8.count + 27, id.hasPrefix(prefix + "_") else { return false }
        return utf8.suffix(26).allSatisfy { alphabet.contains($0) }
    }
}
