import Crypto
import Foundation
import RingRelayCore
import X509

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A freshly generated self-signed P-256 certificate and its private key, for TLS on loopback.
///
/// The certificate is its own trust root (`CA:true`), so a client can trust exactly this
/// certificate and nothing else. It names its hosts in the subject alternative name extension
/// (DNS names and IP addresses) and allows both server and client authentication, so one type
/// serves a simulator's server certificate and a test's client certificate.
///
/// ```swift
/// let certificate = try SelfSignedCertificate(commonName: "Apple Push Services: com.example.app")
/// try simulator.registerClientCertificate(pem: certificate.certificatePEM, topics: ["com.example.app"])
/// ```
public struct SelfSignedCertificate: Sendable {
    /// The certificate, PEM encoded (`-----BEGIN CERTIFICATE-----`).
    public let certificatePEM: String
    /// The certificate's DER bytes.
    public let certificateDER: [UInt8]
    /// The private key, as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    public let privateKeyPEM: String

    /// Generates a new key and certificate.
    ///
    /// - Parameters:
    ///   - commonName: the subject's common name.
    ///   - dnsNames: DNS names the certificate is valid for.
    ///   - ipAddresses: IPv4 or IPv6 addresses, in text form, the certificate is valid for.
    ///   - isCertificateAuthority: sets `CA:true` so the certificate can serve as a trust root.
    ///   - validity: how long the certificate stays valid; it is also back-dated by an hour for clock skew.
    ///   - now: the issuing time.
    /// - Throws: `RingRelayError` with code `invalid_ip_address` for an address that does not parse.
    public init(
        commonName: String = "RingRelay test certificate",
        dnsNames: [String] = ["localhost"],
        ipAddresses: [String] = ["127.0.0.1", "::1"],
        isCertificateAuthority: Bool = true,
        validity: TimeInterval = 30 * 86_400,
        now: Date = Date()
    ) throws {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }

        var alternativeNames: [UInt8] = []
        for dnsName in dnsNames {
            alternativeNames += DEREncoding.element(0x82, Array(dnsName.utf8))  // [2] IMPLICIT IA5String
        }
        for address in ipAddresses {
            alternativeNames += DEREncoding.element(0x87, try Self.addressBytes(address))  // [7] IMPLICIT OCTET STRING
        }

        let extensions = try Certificate.Extensions {
            Critical(
                isCertificateAuthority
                    ? BasicConstraints.isCertificateAuthority(maxPathLength: nil) : BasicConstraints.notCertificateAuthority
            )
            Critical(KeyUsage(digitalSignature: true, keyCertSign: isCertificateAuthority))
            try ExtendedKeyUsage([.serverAuth, .clientAuth])
            SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey))
            Certificate.Extension(
                oid: .X509ExtensionID.subjectAlternativeName, critical: false,
                value: DEREncoding.element(0x30, alternativeNames)[...])
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(validity),
            issuer: name,
            subject: name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(key))

        // swift-certificates exposes the to-be-signed bytes but keeps its serializer in SwiftASN1,
        // which this target does not depend on; the outer Certificate SEQUENCE is simple enough to
        // assemble here: tbsCertificate, AlgorithmIdentifier(ecdsa-with-SHA256), BIT STRING(signature).
        let tbs = Array(certificate.tbsCertificateBytes)
        let signature = try key.signature(for: tbs).derRepresentation
        let ecdsaWithSHA256: [UInt8] = [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
        let der = DEREncoding.element(0x30, tbs + ecdsaWithSHA256 + DEREncoding.element(0x03, [0x00] + Array(signature)))

        self.certificateDER = der
        self.certificatePEM = Self.pem(der, label: "CERTIFICATE")
        self.privateKeyPEM = key.pemRepresentation
    }

    /// Wraps DER bytes in PEM armour with 64-character lines.
    static func pem(_ der: [UInt8], label: String) -> String {
        let base64 = Data(der).base64EncodedString()
        var lines: [Substring] = []
        var index = base64.startIndex
        while index < base64.endIndex {
            let end = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(base64[index..<end])
            index = end
        }
        return "-----BEGIN \(label)-----\n" + lines.joined(separator: "\n") + "\n-----END \(label)-----\n"
    }

    /// The network-order bytes of an IPv4 or IPv6 address in text form.
    static func addressBytes(_ address: String) throws -> [UInt8] {
        var v4 = [UInt8](repeating: 0, count: 4)
        if inet_pton(AF_INET, address, &v4) == 1 { return v4 }
        var v6 = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET6, address, &v6) == 1 { return v6 }
        throw RingRelayError(
            .badRequest, code: "invalid_ip_address",
            "'\(address)' is not an IPv4 or IPv6 address; pass addresses like 127.0.0.1 or ::1.")
    }
}

/// Just enough DER to frame a few definite-length elements.
enum DEREncoding {
    /// A tag-length-value element.
    static func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    private static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var remaining = count
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }
}
