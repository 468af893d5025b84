import Crypto
import Foundation
import RingRelayCore
import Testing

@Suite struct ResourceIDTests {
    @Test func idsSortByCreationTimeAndAreUnique() {
        let base = Date(timeIntervalSince1970: 1_790_000_000)
        let ids = (0..<1000).map { ResourceID.make(ResourceID.binding, at: base.addingTimeInterval(Double($0) / 1000)) }
        let outOfOrder = zip(ids, ids.dropFirst()).filter { $0 >= $1 }
        #expect(outOfOrder.isEmpty, "\(outOfOrder.count) pairs out of order, first: \(outOfOrder.first.map { "\($0) >= \($1)" } ?? "")")
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { ResourceID.isValid($0, prefix: ResourceID.binding) })
        let sameMillisecond = (0..<1000).map { _ in ResourceID.make(ResourceID.binding, at: base) }
        #expect(Set(sameMillisecond).count == 1000)
    }

    @Test func validationRejectsOtherShapes() {
        let id = ResourceID.make(ResourceID.account)
        #expect(ResourceID.isValid(id, prefix: "acc"))
        #expect(!ResourceID.isValid(id, prefix: "bnd"))
        #expect(!ResourceID.isValid(id + "0", prefix: "acc"))
        #expect(!ResourceID.isValid(String(id.dropLast()) + "U", prefix: "acc"))
    }

    /// Push ids (`apns-id`) come from the same pool: version 4, RFC 9562's variant, never repeated,
    /// and every random bit in use (no byte stuck across 20,000 ids, which span several refills).
    @Test func pooledUUIDsAreVersion4AndUnique() {
        let ids = (0..<20_000).map { _ in UUID.pooledRandom() }
        #expect(Set(ids).count == ids.count)
        var seenOr = [UInt8](repeating: 0, count: 16)
        var seenAnd = [UInt8](repeating: 0xFF, count: 16)
        for id in ids {
            let bytes = withUnsafeBytes(of: id.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4 && bytes[8] >> 6 == 0b10)
            for index in 0..<16 {
                seenOr[index] |= bytes[index]
                seenAnd[index] &= bytes[index]
            }
        }
        // Bits other than the version's and the variant's take both values.
        let fixedOnes: [Int: UInt8] = [6: 0x40, 8: 0x80]
        let fixedZeros: [Int: UInt8] = [6: 0xB0, 8: 0x40]
        for index in 0..<16 {
            #expect(seenAnd[index] == fixedOnes[index, default: 0], "byte \(index)")
            #expect(seenOr[index] == 0xFF & ~fixedZeros[index, default: 0], "byte \(index)")
        }
        #expect(ids[0].uuidString.lowercased().range(of: #"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"#, options: .regularExpression) != nil)
    }
}

@Suite struct BindingRulesTests {
    @Test func apnsTokensAreNormalisedToLowercase() throws {
        let token = String(repeating: "AB", count: 32)
        #expect(try BindingRules.validateToken(token, type: .apnsVoIP) == token.lowercased())
    }

    @Test func environmentDefaultsToProductionForAPNsOnly() throws {
        let apns = try BindingRegistration(
            accountID: "acc", identity: "bob", type: .apnsAlert, token: String(repeating: "0", count: 64), environment: nil,
            deviceID: nil, publicKey: nil)
        #expect(apns.environment == .production)
        #expect(throws: RingRelayError.self) {
            try BindingRegistration(accountID: "acc", identity: "bob", type: .fcm, token: "t", environment: .sandbox, deviceID: nil, publicKey: nil)
        }
    }

    @Test func identitiesRejectControlCharacters() {
        #expect(throws: RingRelayError.self) { try BindingRules.validateIdentity("bob\n") }
        #expect(throws: Never.self) { try BindingRules.validateIdentity("bob smith ☎") }
    }

    /// Limits count UTF-8 bytes, not characters: one character can carry kilobytes of combining
    /// marks. Bidi overrides, zero-width characters and line separators are refused (they make a
    /// log line or a call screen say something else than what is stored).
    @Test func identitiesAndDeviceIDsAreBoundedInBytesAndPrintable() {
        let zalgo = "a" + String(repeating: "\u{0301}", count: 2_000)  // one character, 4 KB
        #expect(zalgo.count == 1)
        #expect(throws: RingRelayError.self) { try BindingRules.validateIdentity(zalgo) }
        #expect(throws: RingRelayError.self) { try BindingRules.validateDeviceID(zalgo) }
        #expect(throws: Never.self) { try BindingRules.validateIdentity(String(repeating: "é", count: 128)) }  // 256 bytes
        #expect(throws: RingRelayError.self) { try BindingRules.validateIdentity(String(repeating: "é", count: 129)) }
        for sneaky in ["admin\u{202E}nimda", "bob\u{200B}", "bob\u{2028}alice", "\u{2066}bob\u{2069}", "bob\u{FEFF}"] {
            #expect(throws: RingRelayError.self, "\(sneaky.unicodeScalars.map { String($0.value, radix: 16) })") {
                try BindingRules.validateIdentity(sneaky)
            }
            #expect(throws: RingRelayError.self) { try BindingRules.validateDeviceID(sneaky) }
        }
    }

    /// Display names (a caller's, shown by the system call UI) keep emoji, which need zero-width
    /// joiners, but not bidi controls, line breaks or kilobytes in one character.
    @Test func displayTextKeepsEmojiAndRefusesWhatLies() {
        func check(_ text: String) throws(RingRelayError) {
            try BindingRules.validateDisplayText(text, field: "displayName", maxCharacters: 128, maxBytes: 512)
        }
        for fine in ["Alice", "Zoë Ångström", "👨‍👩‍👧 Family", "山田太郎"] {
            #expect(throws: Never.self, "\(fine)") { try check(fine) }
        }
        let zalgo = "a" + String(repeating: "\u{0301}", count: 2_000)
        for refused in ["", zalgo, "Bank\u{202E}evil", "\u{2067}Alice\u{2069}", "Alice\nBob", "Alice\u{2028}Bob", "Al\u{0}ice", String(repeating: "x", count: 129)] {
            #expect(throws: RingRelayError.self, "\(refused.unicodeScalars.prefix(8).map { String($0.value, radix: 16) })") { try check(refused) }
        }
    }

    @Test func publicKeysMustBeUncompressedP256Points() {
        let point = P256.KeyAgreement.PrivateKey().publicKey.x963Representation.base64EncodedString()
        #expect(throws: Never.self) { try BindingRules.validatePublicKey(point) }
        let compressed = Data([0x02] + Array(repeating: 7, count: 32)).base64EncodedString()
        #expect(throws: RingRelayError.self) { try BindingRules.validatePublicKey(compressed) }
        // The right size and prefix, but (7…, 7…) is not on the curve.
        let offCurve = Data([0x04] + Array(repeating: 7, count: 64)).base64EncodedString()
        #expect(throws: RingRelayError.self) { try BindingRules.validatePublicKey(offCurve) }
    }
}

@Suite struct HexTests {
    @Test func bytesBecomeLowercaseHexPairs() {
        #expect([UInt8]().hexEncoded == "")
        #expect([0x00, 0x0f, 0xa5, 0xff].hexEncoded == "000fa5ff")
        let all = (0...255).map(UInt8.init)
        #expect(all.hexEncoded == all.map { String(format: "%02x", $0) }.joined())
    }
}
