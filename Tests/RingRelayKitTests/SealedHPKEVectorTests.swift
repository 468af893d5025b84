import Crypto
import Foundation
import Testing

/// swift-crypto's HPKE, which sealed invites use, against RFC 9180's own test vectors for
/// DHKEM(P-256, HKDF-SHA256) with HKDF-SHA256: AES-128-GCM (the RFC's appendix A.3) and
/// AES-256-GCM (the suite of sealed invites), in all four modes, from the CFRG's
/// test-vectors.json (see Fixtures/README.md). Only the receiving side can be checked: the
/// sender draws its ephemeral key itself.
@Suite struct SealedHPKEVectorTests {
    struct Vector: Decodable {
        struct Encryption: Decodable {
            var aad: String
            var ct: String
            var pt: String
        }

        struct Export: Decodable {
            var context: String
            var length: Int
            var value: String

            enum CodingKeys: String, CodingKey {
                case context = "exporter_context"
                case length = "L"
                case value = "exported_value"
            }
        }

        var mode: Int
        var aeadID: Int
        var info: String
        var skRm: String
        var enc: String
        var pkSm: String?
        var psk: String?
        var pskID: String?
        var encryptions: [Encryption]
        var exports: [Export]

        enum CodingKeys: String, CodingKey {
            case mode
            case aeadID = "aead_id"
            case info, skRm, enc, pkSm, psk
            case pskID = "psk_id"
            case encryptions, exports
        }
    }

    static let vectors: [Vector] = {
        (try? JSONDecoder().decode([Vector].self, from: Fixture.data("hpke-rfc9180-p256-sha256"))) ?? []
    }()

    @Test func theFixtureHoldsBothAEADsInEveryMode() {
        #expect(Set(Self.vectors.map { "\($0.aeadID)/\($0.mode)" }) == ["1/0", "1/1", "1/2", "1/3", "2/0", "2/1", "2/2", "2/3"])
    }

    @Test(arguments: vectors)
    func recipientOpensTheVectorsCiphertextsAndExports(_ vector: Vector) throws {
        let suite = HPKE.Ciphersuite(kem: .P256_HKDF_SHA256, kdf: .HKDF_SHA256, aead: vector.aeadID == 1 ? .AES_GCM_128 : .AES_GCM_256)
        let privateKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: hex(vector.skRm))
        let info = try hex(vector.info)
        let enc = try hex(vector.enc)
        var recipient: HPKE.Recipient
        switch vector.mode {
        case 0:
            recipient = try HPKE.Recipient(privateKey: privateKey, ciphersuite: suite, info: info, encapsulatedKey: enc)
        case 1:
            recipient = try HPKE.Recipient(
                privateKey: privateKey, ciphersuite: suite, info: info, encapsulatedKey: enc,
                presharedKey: SymmetricKey(data: try hex(#require(vector.psk))), presharedKeyIdentifier: try hex(#require(vector.pskID)))
        case 2:
            recipient = try HPKE.Recipient(
                privateKey: privateKey, ciphersuite: suite, info: info, encapsulatedKey: enc,
                authenticatedBy: P256.KeyAgreement.PublicKey(x963Representation: hex(#require(vector.pkSm))))
        default:
            recipient = try HPKE.Recipient(
                privateKey: privateKey, ciphersuite: suite, info: info, encapsulatedKey: enc,
                authenticatedBy: P256.KeyAgreement.PublicKey(x963Representation: hex(#require(vector.pkSm))),
                presharedKey: SymmetricKey(data: try hex(#require(vector.psk))), presharedKeyIdentifier: try hex(#require(vector.pskID)))
        }
        // The vector's encryptions are sequence numbers 0, 1, 2 of one context: open them in order.
        for encryption in vector.encryptions {
            let plaintext = try recipient.open(hex(encryption.ct), authenticating: hex(encryption.aad))
            #expect(plaintext == (try hex(encryption.pt)))
        }
        for export in vector.exports {
            let secret = try recipient.exportSecret(context: hex(export.context), outputByteCount: export.length)
            #expect(secret.withUnsafeBytes { Data($0) } == (try hex(export.value)))
        }
    }

    @Test func aChangedCiphertextOfAVectorDoesNotOpen() throws {
        let vector = try #require(Self.vectors.first { $0.mode == 2 && $0.aeadID == 2 })
        let privateKey = try P256.KeyAgreement.PrivateKey(rawRepresentation: hex(vector.skRm))
        var recipient = try HPKE.Recipient(
            privateKey: privateKey, ciphersuite: .P256_SHA256_AES_GCM_256, info: hex(vector.info), encapsulatedKey: hex(vector.enc),
            authenticatedBy: P256.KeyAgreement.PublicKey(x963Representation: hex(#require(vector.pkSm))))
        var ciphertext = try hex(#require(vector.encryptions.first).ct)
        ciphertext[ciphertext.startIndex] ^= 0x01
        #expect(throws: (any Error).self) { try recipient.open(ciphertext, authenticating: hex(vector.encryptions[0].aad)) }
    }

    private func hex(_ text: String) throws -> Data {
        try #require(Data(hexDigits: text))
    }
}

extension SealedHPKEVectorTests.Vector: CustomTestStringConvertible {
    var testDescription: String { "mode \(mode), AEAD \(aeadID == 1 ? "AES-128-GCM" : "AES-256-GCM")" }
}

extension Data {
    /// Test helper: reads hex digits.
    init?(hexDigits text: String) {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex) ?? text.endIndex
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        self.init(bytes)
    }
}
