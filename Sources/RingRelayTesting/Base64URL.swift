import Foundation

/// Decodes unpadded (or padded) base64url strictly, as the simulated services do: `nil` for any
/// character outside the alphabet, so a token with stray characters is refused, not repaired.
func base64URLDecode(_ text: Substring) -> Data? {
    var base64 = ""
    base64.reserveCapacity(text.utf8.count + 3)
    var trimmed = text
    while trimmed.hasSuffix("=") { trimmed = trimmed.dropLast() }
    for scalar in trimmed.unicodeScalars {
        switch scalar {
        case "A"..."Z", "a"..."z", "0"..."9": base64.unicodeScalars.append(scalar)
        case "-": base64.append("+")
        case "_": base64.append("/")
        default: return nil
        }
    }
    guard base64.utf8.count % 4 != 1 else { return nil }
    base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
    return Data(base64Encoded: base64)
}
