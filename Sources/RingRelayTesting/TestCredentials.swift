import Crypto
import Foundation
import _CryptoExtras

/// Throwaway credentials in the shapes Apple and Google issue, for tests and local trials.
public enum TestCredentials {
    /// A fresh APNs token-signing key as the contents of a `.p8` file (PKCS#8 PEM, P-256).
    public static func apnsP8() -> String {
        P256.Signing.PrivateKey().pemRepresentation
    }

    /// A fresh Google service account JSON object with a real 2048-bit RSA key.
    ///
    /// - Parameter tokenURI: where OAuth assertions are exchanged (a simulator's URL in tests).
    public static func serviceAccount(
        projectID: String = "ringrelay-test", tokenURI: String = "https://oauth2.googleapis.com/token"
    ) throws -> [String: String] {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        return [
            "type": "service_account",
            "project_id": projectID,
            "private_key_id": "0123456789abcdef0123456789abcdef01234567",
            "private_key": key.pemRepresentation,
            "client_email": "ringrelay@\(projectID).iam.gserviceaccount.com",
            "client_id": "100000000000000000000",
            "token_uri": tokenURI,
        ]
    }

    /// A self-signed P-256 client certificate valid until 2126, shaped like an APNs certificate.
    public static let apnsCertificatePEM = """
-----BEGIN CERTIFICATE-----
MIICDzCCAbWgAwIBAgIUBYG3XcDHHuvIZCs0KCfK71MRMM8wCgYIKoZIzj0EAwIw
XDEzMDEGA1UEAwwqQXBwbGUgUHVzaCBTZXJ2aWNlczogY29tLmV4YW1wbGUucmlu
Z3JlbGF5MSUwIwYKCZImiZPyLGQBAQwVY29tLmV4YW1wbGUucmluZ3JlbGF5MCAX
DTI2MTEyMjIyMjA1MVoYDzIxMjYxMDI5MjIyMDUxWjBcMTMwMQYDVQQDDCpBcHBs
ZSBQdXNoIFNlcnZpY2VzOiBjb20uZXhhbXBsZS5yaW5ncmVsYXkxJTAjBgoJkiaJ
k/IsZAEBDBVjb20uZXhhbXBsZS5yaW5ncmVsYXkwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAARCrZguY02gKW8FRghVfIKJV1O/9mZVAqwArsa7PYDywSXFwKdh/b44
mjVdAwO033ejQg6egwnKfeekfeB7cx0Io1MwUTAdBgNVHQ4EFgQUkA0fYWQmLsSx
LFHQ32X3cRN7rrMwHwYDVR0jBBgwFoAUkA0fYWQmLsSxLFHQ32X3cRN7rrMwDwYD
VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEAkiJC+oAd5ygr61bRAgyD
iXATJakvy8nocwxQ/IBwEOkCIBubZd3a1wOaU4vBnXxCbWv8drkBn7/P2PNd+Ohm
AGxQ
-----END CERTIFICATE-----
"""

    /// The private key of ``apnsCertificatePEM``.
    public static let apnsCertificateKeyPEM = """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgugIEZwPcD8E/QEHw
HLfVNYp58PVlaYqodHXqTtq5gdWhRANCAARCrZguY02gKW8FRghVfIKJV1O/9mZV
AqwArsa7PYDywSXFwKdh/b44mjVdAwO033ejQg6egwnKfeekfeB7cx0I
-----END PRIVATE KEY-----
"""
}
