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

    /// ``apnsCertificatePEM`` and its key as a PKCS#12 file (base64), as Keychain Access exports it.
    public static let apnsCertificatePKCS12Base64 = "MIIEnAIBAzCCBFIGCSqGSIb3DQEHAaCCBEMEggQ/MIIEOzCCAvIGCSqGSIb3DQEHBqCCAuMwggLfAgEAMIIC2AYJKoZIhvcNAQcBMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAh3DE2b267pmQICCAAwDAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEHUAj1WXCM6b9dFDAgS47KaAggJwTWDyxy8NJEbnIdGlm7TMJ+L2RQ/zt+5SRurjKMXuvX14Z8jVOJSb/dyBomP7GoYUW42yRAXeN941r6Nsdqbn8vDm+FugI8x9/XvAD9sD68grufZz52qGZEObq7t0Q0T+WsT/S/op+F4GTeInnHoICwEjJAMXwQmSVHvxepDR4D9/3ndqBRc1TdiLknOULJSLRlQVJr/hBbBYKL1P7R9qUyzzX1pXaVRDW+sCa1306wKKzWXLUYl+PleCL3J9aa/EDOX2zEete3eJQ/I8W2pm3y7NESZ+xXeixZhhVg7b1LTYAg1GKKquTRzXKGfc/eAvRQkK/r3HnqFpyCB6Qm51ysVW++9nIQGqjrcZd1FXauXM+90K+NDgMzEkAz0kCfjID8A+86Pq77SJA8l1c5/bJhjALGumpgmLr2fMjIVdtdjV5xy0ikQ6Ry4SxAjnpi3ZTpa9R3ndoJNlZXjpho06MMjuniHsMxhdLqrvSI+o6lsZ8lVzW/dhLFKeoZcp4JFDSiY+v4WBL0yFkXd8EG4Ak+JpfzoFB9YqltttIAHebuPUcIR45KumfFkh61PNa4krPOqszyDRBI9yWrZyC4GXYiKU2NsIjnqdDTK/0adaXE2ESImQ7HUxGmHvpYgkygA7VmOJvS84ncKaCbphWUtiiVngFBf8pKsSh0onH6LVZT4MIFAEVqVcD5uoY3xuJJmlpBPN13zHkwIZ84XtfcLq4A0wYOcN+hs5wxKGwpcFlCYgMmorgyo1YV9lu5WQdZwmFferHfF/SSYFf0Q7xtZHL0cgj2A4I8436MPHfOX8LvqK+C4ISmKdVLAN+gS9NIOYMIIBQQYJKoZIhvcNAQcBoIIBMgSCAS4wggEqMIIBJgYLKoZIhvcNAQwKAQKgge8wgewwVwYJKoZIhvcNAQUNMEowKQYJKoZIhvcNAQUMMBwECLPLrbOhbXJxAgIIADAMBggqhkiG9w0CCQUAMB0GCWCGSAFlAwQBKgQQSpiPgr6GWRwvTEd+S9d9dASBkIAuufQpEd56QYfQjWYZwWwHms9TfRKMUutPL6+7O8kMU3AZs9UuOzXvRy9g3osyZb6Tg2Z/cUkUTQITEJnV3ojN0143ViDWyihA4wifLoIrLe6lGtvcfotPHiLne22nPLQ3fKMNeVN3VXquPBefyhhq5tDwhu7lWtTD4BAGo1VoepqaKGVHa9K+T9oQkQwyKzElMCMGCSqGSIb3DQEJFTEWBBRXf4rTHjcPQr3hmwtauUQ3BrTjBDBBMDEwDQYJYIZIAWUDBAIBBQAEIF1XhD9FyqPgU/YbORpplWaSuYgzHcDHIq/L60llSbQeBAi0y2JGKNMosgICCAA="

    /// The passphrase of ``apnsCertificatePKCS12Base64``.
    public static let apnsCertificatePKCS12Passphrase = "ringrelay"

    /// The private key of ``apnsCertificatePEM``.
    public static let apnsCertificateKeyPEM = """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgugIEZwPcD8E/QEHw
HLfVNYp58PVlaYqodHXqTtq5gdWhRANCAARCrZguY02gKW8FRghVfIKJV1O/9mZV
AqwArsa7PYDywSXFwKdh/b44mjVdAwO033ejQg6egwnKfeekfeB7cx0I
-----END PRIVATE KEY-----
"""
}
