import Crypto
import Foundation

/// The sealed box's bytes and the two HPKE layers inside it (see
/// `docs/decisions/0005-sealed-invites.md` for why it is built this way).
///
/// ```
/// header   version (1) | kem 0x0010 (2) | kdf 0x0001 (2) | aead 0x0002 (2)
///          | recipient key id (16) | binding id length (1) | binding id (UTF-8)
/// body     enc (65) | outer ciphertext
/// outer    base mode to the recipient's key, info = context, aad = header; it hides who calls:
///          sender identity length (2) | sender identity | sender key id (16) | inner enc (65) | inner ciphertext
/// inner    auth mode with the sender's key, info = context | sender identity | sender key id:
///          the payload, JSON
/// ```
///
/// Opening takes two steps because the inner layer needs the sender's public key, which the
/// recipient only learns the name of from the outer layer: ``openOuter(_:privateKey:accountId:identity:bindingIds:)``,
/// then ``Outer/openInner(senderKey:)``.
enum SealedBox {
    static let version: UInt8 = 1
    /// RFC 9180's identifiers of DHKEM(P-256, HKDF-SHA256), HKDF-SHA256 and AES-256-GCM.
    static let suiteIdentifiers: [UInt16] = [0x0010, 0x0001, 0x0002]
    static let ciphersuite = HPKE.Ciphersuite.P256_SHA256_AES_GCM_256
    static let encapsulatedKeyLength = 65
    private static let infoLabel = Data("RingRelay sealed invite v1".utf8)

    /// Seals `payload` for `address`, authenticated with the sender's private key.
    static func seal(
        _ payload: Data, from sender: (identity: String, privateKey: P256.KeyAgreement.PrivateKey),
        to recipientKey: P256.KeyAgreement.PublicKey, address: SealedInviteAddress
    ) throws -> Data {
        let senderKeyID = DeviceKeyID(of: sender.privateKey.publicKey)
        let info = try Self.info(address)
        var inner = try HPKE.Sender(
            recipientKey: recipientKey, ciphersuite: ciphersuite,
            info: try Self.innerInfo(info, senderIdentity: sender.identity, senderKeyID: senderKeyID),
            authenticatedBy: sender.privateKey)
        let innerCiphertext = try inner.seal(payload)

        var outerPlaintext = ByteWriter()
        try outerPlaintext.lengthPrefixed16(sender.identity)
        outerPlaintext.append(senderKeyID.bytes)
        outerPlaintext.append(inner.encapsulatedKey)
        outerPlaintext.append(innerCiphertext)

        let header = try header(recipientKeyID: DeviceKeyID(of: recipientKey), bindingId: address.bindingId)
        var outer = try HPKE.Sender(recipientKey: recipientKey, ciphersuite: ciphersuite, info: info)
        let outerCiphertext = try outer.seal(outerPlaintext.bytes, authenticating: header)
        return header + outer.encapsulatedKey + outerCiphertext
    }

    /// The outer layer, opened: who the box says sent it, and the inner layer still sealed.
    struct Outer {
        /// The binding the box was sealed for (authenticated: the outer layer opened with it).
        var bindingId: String
        var senderIdentity: String
        var senderKeyID: DeviceKeyID
        fileprivate var innerInfo: Data
        fileprivate var innerEncapsulatedKey: Data
        fileprivate var innerCiphertext: Data
        fileprivate var privateKey: P256.KeyAgreement.PrivateKey

        /// Opens the inner layer with the sender's public key.
        ///
        /// - Throws: ``SealedInviteRefusal/unauthenticatedSender`` when that key did not make it.
        func openInner(senderKey: P256.KeyAgreement.PublicKey) throws(SealedInviteRefusal) -> Data {
            do {
                var recipient = try HPKE.Recipient(
                    privateKey: privateKey, ciphersuite: SealedBox.ciphersuite, info: innerInfo, encapsulatedKey: innerEncapsulatedKey,
                    authenticatedBy: senderKey)
                return try recipient.open(innerCiphertext)
            } catch {
                throw .unauthenticatedSender
            }
        }
    }

    /// Opens the outer layer of a box with this device's key, for this account and identity.
    ///
    /// The box is opened with the binding id its header names and only then compared with
    /// `bindingIds` (this device's bindings), so that a box for another binding of the same key
    /// is told apart from a changed one.
    static func openOuter(
        _ box: Data, privateKey: P256.KeyAgreement.PrivateKey, accountId: String, identity: String, bindingIds: Set<String>
    ) throws(SealedInviteRefusal) -> Outer {
        var reader = ByteReader(box)
        guard reader.byte() == version, reader.uint16() == suiteIdentifiers[0], reader.uint16() == suiteIdentifiers[1],
            reader.uint16() == suiteIdentifiers[2], let keyID = reader.bytes(DeviceKeyID.byteCount).flatMap(DeviceKeyID.init(bytes:)),
            let bindingLength = reader.byte(), let bindingId = reader.string(Int(bindingLength)), !bindingId.isEmpty
        else { throw .malformed }
        let header = box.prefix(reader.offset)
        guard let encapsulatedKey = reader.bytes(encapsulatedKeyLength) else { throw .malformed }
        guard keyID == DeviceKeyID(of: privateKey.publicKey) else { throw .wrongKey }

        let sealedFor = SealedInviteAddress(accountId: accountId, identity: identity, bindingId: bindingId)
        let info: Data
        let outerPlaintext: Data
        do {
            info = try Self.info(sealedFor)
            var recipient = try HPKE.Recipient(privateKey: privateKey, ciphersuite: ciphersuite, info: info, encapsulatedKey: encapsulatedKey)
            outerPlaintext = try recipient.open(reader.rest(), authenticating: header)
        } catch {
            throw .tampered
        }
        guard bindingIds.contains(bindingId) else { throw .wrongBinding }

        var outer = ByteReader(outerPlaintext)
        guard let senderIdentity = outer.lengthPrefixed16String(), !senderIdentity.isEmpty,
            let senderKeyID = outer.bytes(DeviceKeyID.byteCount).flatMap(DeviceKeyID.init(bytes:)),
            let innerEncapsulatedKey = outer.bytes(encapsulatedKeyLength),
            let innerInfo = try? Self.innerInfo(info, senderIdentity: senderIdentity, senderKeyID: senderKeyID)
        else { throw .malformed }
        return Outer(
            bindingId: bindingId, senderIdentity: senderIdentity, senderKeyID: senderKeyID,
            innerInfo: innerInfo, innerEncapsulatedKey: innerEncapsulatedKey,
            innerCiphertext: outer.rest(), privateKey: privateKey)
    }

    private static func header(recipientKeyID: DeviceKeyID, bindingId: String) throws -> Data {
        var header = ByteWriter()
        header.append([version])
        for identifier in suiteIdentifiers { header.append(uint16: identifier) }
        header.append(recipientKeyID.bytes)
        let binding = Data(bindingId.utf8)
        guard (1...255).contains(binding.count) else { throw SealingError.fieldTooLong }
        header.append([UInt8(binding.count)])
        header.append(binding)
        return header.bytes
    }

    /// HPKE `info`: the label, then account, identity and binding, each length-prefixed so that
    /// no two addresses give the same bytes.
    static func info(_ address: SealedInviteAddress) throws -> Data {
        var info = ByteWriter()
        info.append(infoLabel)
        try info.lengthPrefixed16(address.accountId)
        try info.lengthPrefixed16(address.identity)
        try info.lengthPrefixed16(address.bindingId)
        return info.bytes
    }

    private static func innerInfo(_ info: Data, senderIdentity: String, senderKeyID: DeviceKeyID) throws -> Data {
        var inner = ByteWriter()
        inner.append(info)
        try inner.lengthPrefixed16(senderIdentity)
        inner.append(senderKeyID.bytes)
        return inner.bytes
    }

    /// An id or identity too long for its length prefix (the server refuses such ones anyway).
    enum SealingError: Error, Equatable {
        case fieldTooLong
    }
}

/// Appends big-endian integers and length-prefixed strings.
struct ByteWriter {
    private(set) var bytes = Data()

    mutating func append(_ data: some DataProtocol) { bytes.append(contentsOf: data) }

    mutating func append(uint16 value: UInt16) { bytes.append(contentsOf: [UInt8(value >> 8), UInt8(value & 0xFF)]) }

    mutating func lengthPrefixed16(_ text: String) throws {
        let utf8 = Data(text.utf8)
        guard utf8.count <= Int(UInt16.max) else { throw SealedBox.SealingError.fieldTooLong }
        append(uint16: UInt16(utf8.count))
        append(utf8)
    }
}

/// Reads what ``ByteWriter`` wrote; every read returns `nil` past the end.
struct ByteReader {
    private let data: Data
    private(set) var offset = 0

    init(_ data: Data) { self.data = Data(data) }

    mutating func bytes(_ count: Int) -> Data? {
        guard count >= 0, data.count - offset >= count else { return nil }
        defer { offset += count }
        return data.subdata(in: offset..<offset + count)
    }

    mutating func byte() -> UInt8? { bytes(1)?.first }

    mutating func uint16() -> UInt16? {
        bytes(2).map { UInt16($0[$0.startIndex]) << 8 | UInt16($0[$0.startIndex + 1]) }
    }

    mutating func string(_ count: Int) -> String? {
        bytes(count).flatMap { String(data: $0, encoding: .utf8) }
    }

    mutating func lengthPrefixed16String() -> String? {
        uint16().flatMap { string(Int($0)) }
    }

    /// Everything not read yet.
    mutating func rest() -> Data {
        defer { offset = data.count }
        return data.subdata(in: offset..<data.count)
    }
}
