extension Sequence<UInt8> {
    /// Lowercase hex, two digits per byte. `String(format:)` per byte is far slower on hot paths
    /// (every authenticated request hashes its API key; every webhook hashes its body).
    public var hexEncoded: String {
        let bytes = Array(self)
        return String(unsafeUninitializedCapacity: bytes.count * 2) { text in
            for (offset, byte) in bytes.enumerated() {
                text[2 * offset] = Self.hexDigit(byte >> 4)
                text[2 * offset + 1] = Self.hexDigit(byte & 0x0F)
            }
            return bytes.count * 2
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
