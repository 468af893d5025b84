extension Sequence<UInt8> {
    /// Lowercase hex, two digits per byte. `String(format:)` per byte is far slower on hot paths
    /// (every authenticated request hashes its API key; every webhook hashes its body).
    public var hexEncoded: String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
