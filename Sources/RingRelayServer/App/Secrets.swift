import Crypto
import Foundation
import RingRelayCore

/// Random secrets and their hashes.
enum Secrets {
    /// A new secret: `prefix` then 32 random bytes in base64url, e.g. `rrk_Q2x…`.
    static func generate(prefix: String) -> String {
        prefix + Data(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }).base64URLEncoded()
    }

    /// SHA-256 of a secret, hex. API keys are random 256-bit values, so a fast hash is enough:
    /// there is nothing to brute-force.
    static func hash(_ secret: String) -> String {
        SHA256.hash(data: Data(secret.utf8)).hexEncoded
    }

    /// Compares two secrets in time that depends only on their lengths' digests, never on where they differ.
    static func constantTimeEqual(_ lhs: String, _ rhs: String) -> Bool {
        let left = SHA256.hash(data: Data(lhs.utf8))
        let right = SHA256.hash(data: Data(rhs.utf8))
        return zip(left, right).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

extension Data {
    /// Base64url without padding (RFC 4648 §5), as JWTs use.
    func base64URLEncoded() -> String {
        base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes base64url with or without padding.
    init?(base64URLEncoded text: some StringProtocol) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }
}
