import Foundation

/// Call ids a caller's SDK chooses itself, for sealed calls: each box names its call
/// (``SealedCallPayload/callId``), so the id must exist before the boxes are sealed and the call
/// is placed with it (`POST /v1/calls` with `callId`).
///
/// They have the server's own shape: `call_` and 26 lowercase Crockford base-32 characters,
/// 48 bits of milliseconds then 80 random bits (a ULID), so they sort by time like the ids the
/// server makes, and two callers never pick the same one.
enum CallIDs {
    private static let alphabet = Array("0123456789abcdefghjkmnpqrstvwxyz".utf8)

    /// A new call id, ordered by `date`.
    ///
    /// ```swift
    /// CallIDs.make()  // "call_06h5…"
    /// ```
    static func make(at date: Date = Date()) -> String {
        var random = SystemRandomNumberGenerator()
        let millis = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded())) & 0xFFFF_FFFF_FFFF
        // 128 bits: 48 time | 16 random (upper), 64 random (lower), written 5 bits at a time from the top.
        let upper = (millis << 16) | UInt64(UInt16.random(in: .min ... .max, using: &random))
        let lower = random.next()
        var characters = Array("call_".utf8)
        for index in 0..<26 {
            let shift = 128 - 5 * (index + 1)  // the last group has 3 bits, below bit 0
            let value: UInt64
            if shift >= 64 {
                value = upper >> UInt64(shift - 64)
            } else if shift > 59 {
                value = (upper << UInt64(64 - shift)) | (lower >> UInt64(shift))
            } else if shift >= 0 {
                value = lower >> UInt64(shift)
            } else {
                value = lower << UInt64(-shift)
            }
            characters.append(alphabet[Int(value & 0x1F)])
        }
        return String(decoding: characters, as: UTF8.self)
    }
}
