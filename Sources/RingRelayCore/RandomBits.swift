import Foundation
import Synchronization

/// Random bits from the system's CSPRNG (`arc4random_buf`), drawn 4 KiB at a time and handed out
/// once each: resource ids and push ids take them by the call, many per ring.
///
/// A system call per draw is what this avoids: `SystemRandomNumberGenerator` makes one for every
/// 8 bytes, and Foundation's `UUID()` on Linux (libuuid) opens, reads and closes `/dev/urandom`
/// and calls `getrandom` for each id, five system calls a push.
package final class RandomBits: Sendable {
    /// The process's pool.
    package static let shared = RandomBits()

    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: 4096)
        var used = 4096

        /// Refills the pool when fewer than `count` bytes are left.
        mutating func reserve(_ count: Int) {
            guard used + count > bytes.count else { return }
            bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
            used = 0
        }

        /// The next 8 bytes as an integer (the caller reserved them).
        mutating func take64() -> UInt64 {
            var value: UInt64 = 0
            for offset in 0..<8 { value = value << 8 | UInt64(bytes[used + offset]) }
            used += 8
            return value
        }
    }

    private let pool = Mutex(Pool())

    /// 80 fresh random bits.
    package func next80() -> (UInt16, UInt64) {
        pool.withLock { pool in
            pool.reserve(10)
            let high = UInt16(pool.bytes[pool.used]) << 8 | UInt16(pool.bytes[pool.used + 1])
            pool.used += 2
            return (high, pool.take64())
        }
    }

    /// 128 fresh random bits.
    package func next128() -> (UInt64, UInt64) {
        pool.withLock { pool in
            pool.reserve(16)
            return (pool.take64(), pool.take64())
        }
    }
}

extension UUID {
    /// A random (version 4) UUID from ``RandomBits``: as unpredictable as Foundation's `UUID()`,
    /// without its system calls.
    package static func pooledRandom() -> UUID {
        let (high, low) = RandomBits.shared.next128()
        // Version 4 in the top nibble of byte 6, variant 10 in the top bits of byte 8 (RFC 9562).
        let versioned = (high & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let varied = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        func byte(_ word: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: word >> UInt64(56 - 8 * index)) }
        return UUID(
            uuid: (
                byte(versioned, 0), byte(versioned, 1), byte(versioned, 2), byte(versioned, 3), byte(versioned, 4), byte(versioned, 5),
                byte(versioned, 6), byte(versioned, 7), byte(varied, 0), byte(varied, 1), byte(varied, 2), byte(varied, 3),
                byte(varied, 4), byte(varied, 5), byte(varied, 6), byte(varied, 7)
            ))
    }
}
