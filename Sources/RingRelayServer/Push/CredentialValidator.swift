import Crypto
import Foundation
import NIOSSL
import RingRelayCore
import RingRelayFCM
import RingRelayWire
import _CryptoExtras

/// Checks uploaded credentials before they are stored, so a broken key is reported at upload time
/// and not at the first ring. Messages never echo key material.
enum CredentialValidator {
    /// Validates an APNs upload: token auth (`teamId`, `keyId`, P-256 `.p8`) or certificate auth.
    static func apns(_ request: APNsCredentialRequest) throws(RingRelayError) -> APNsCredential {
        let topic = request.topic.trimmingCharacters(in: .whitespaces)
        guard !topic.isEmpty, topic.count <= 255, !topic.hasSuffix(".voip"), !topic.contains(" ") else {
            throw .invalidField("topic", "must be the app's bundle id, e.g. com.example.app (without '.voip'; RingRelay adds it for VoIP pushes).")
        }
        if let pkcs12 = request.pkcs12 {
            guard request.teamId == nil, request.keyId == nil, request.certificate == nil, request.privateKey == nil else {
                throw .invalidField("pkcs12", "send pkcs12 + passphrase alone, without teamId, keyId, certificate or privateKey.")
            }
            guard let data = Data(base64Encoded: pkcs12, options: .ignoreUnknownCharacters) else {
                throw .invalidField("pkcs12", "must be the .p12 file in base64.")
            }
            let passphrase = request.passphrase ?? ""
            let bundle: NIOSSLPKCS12Bundle
            do {
                bundle = try NIOSSLPKCS12Bundle(buffer: Array(data), passphrase: Array(passphrase.utf8))
            } catch {
                throw .invalidField("pkcs12", "cannot be opened: check that it is a .p12 file and that the passphrase is right.")
            }
            guard let leaf = bundle.certificateChain.first else { throw .invalidField("pkcs12", "holds no certificate.") }
            guard Double(leaf.notValidAfter) > Date().timeIntervalSince1970 else {
                throw .invalidField("pkcs12", "holds an expired certificate; export a current one from Keychain Access.")
            }
            return APNsCredential(authentication: .pkcs12(data: data, passphrase: passphrase), topic: topic)
        }
        guard let privateKeyPEM = request.privateKey else { throw .missingField("privateKey") }
        if let certificatePEM = request.certificate {
            guard request.teamId == nil, request.keyId == nil else {
                throw .invalidField("certificate", "send either teamId + keyId + privateKey (token auth) or certificate + privateKey, not both.")
            }
            let certificates: [NIOSSLCertificate]
            do {
                certificates = try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8))
            } catch {
                throw .invalidField("certificate", "is not a PEM certificate ('-----BEGIN CERTIFICATE-----').")
            }
            guard let leaf = certificates.first else {
                throw .invalidField("certificate", "contains no certificate.")
            }
            guard Double(leaf.notValidAfter) > Date().timeIntervalSince1970 else {
                throw .invalidField("certificate", "has expired; download a new one from the Apple Developer portal.")
            }
            do {
                _ = try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem)
            } catch {
                throw .invalidField("privateKey", "is not an unencrypted PEM private key.")
            }
            return APNsCredential(
                authentication: .certificate(certificatePEM: certificatePEM, privateKeyPEM: privateKeyPEM), topic: topic)
        }
        guard let teamID = request.teamId else { throw .missingField("teamId") }
        guard let keyID = request.keyId else { throw .missingField("keyId") }
        guard Self.isAppleID(teamID) else {
            throw .invalidField("teamId", "must be the 10-character Apple team id, e.g. ABCDE12345.")
        }
        guard Self.isAppleID(keyID) else {
            throw .invalidField("keyId", "must be the 10-character key id of the .p8 key, e.g. 2X9R4HXF34.")
        }
        do {
            _ = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        } catch {
            throw .invalidField("privateKey", "must be the contents of the .p8 file: a PEM P-256 private key ('-----BEGIN PRIVATE KEY-----').")
        }
        return APNsCredential(authentication: .token(teamID: teamID, keyID: keyID, privateKeyPEM: privateKeyPEM), topic: topic)
    }

    /// Google's OAuth token hosts: `oauth2.googleapis.com` (today's service accounts) and
    /// `accounts.google.com` (older ones).
    static let googleTokenHosts: Set<String> = ["oauth2.googleapis.com", "accounts.google.com"]

    /// The hosts a `token_uri` may name with `configuration`: Google's, and the FCM endpoint's
    /// when the operator chose one (the simulator).
    static func fcmTokenHosts(for configuration: FCMConfiguration) -> Set<String> {
        var hosts = googleTokenHosts
        if configuration.endpoint != FCMConfiguration().endpoint, let host = URL(string: configuration.endpoint)?.host?.lowercased() {
            hosts.insert(host)
        }
        return hosts
    }

    /// Whether `tokenURI` is an https URL on one of `hosts`, with no user or password.
    static func isAllowedTokenURI(_ tokenURI: String, hosts: Set<String>) -> Bool {
        guard let url = URL(string: tokenURI), url.scheme == "https", let host = url.host?.lowercased() else { return false }
        return hosts.contains(host) && url.user == nil && url.password == nil
    }

    /// Validates a Google service account JSON.
    ///
    /// - Parameter tokenHosts: the hosts a `token_uri` may name (https only): Google's, and the
    ///   host of `--fcm-endpoint` when the operator set one (how the simulator runs). Any other
    ///   URL would let whoever uploads a service account make the server fetch it (a port scan
    ///   or a probe of internal services, through a test push).
    static func fcm(_ request: FCMCredentialRequest, tokenHosts: Set<String> = googleTokenHosts) throws(RingRelayError) -> FCMCredential {
        let account = request.serviceAccount
        func field(_ name: String) throws(RingRelayError) -> String {
            guard let value = account[name] else { throw .missingField("serviceAccount.\(name)") }
            guard let text = value.stringValue, !text.isEmpty else {
                throw .invalidField("serviceAccount.\(name)", "must be a non-empty string.")
            }
            return text
        }
        if let type = account["type"], type.stringValue != "service_account" {
            throw .invalidField("serviceAccount.type", "must be 'service_account'; download the key from Firebase console → Project settings → Service accounts.")
        }
        let email = try field("client_email")
        let privateKey = try field("private_key")
        let projectID = try field("project_id")
        let tokenURI = try field("token_uri")
        guard email.contains("@") else {
            throw .invalidField("serviceAccount.client_email", "must be the service account's e-mail address.")
        }
        guard isAllowedTokenURI(tokenURI, hosts: tokenHosts) else {
            throw .invalidField(
                "serviceAccount.token_uri", "must be Google's OAuth endpoint, https://oauth2.googleapis.com/token, as in the downloaded file.")
        }
        do {
            _ = try _RSA.Signing.PrivateKey(pemRepresentation: privateKey)
        } catch {
            throw .invalidField("serviceAccount.private_key", "must be the PEM RSA private key from the service account file.")
        }
        let json: String
        do {
            json = String(decoding: try JSONEncoder.sortedKeys.encode(account), as: UTF8.self)
        } catch {
            throw RingRelayError(.internal, code: .internalError, "Could not store the service account.", underlying: error)
        }
        return FCMCredential(serviceAccountJSON: json, projectID: projectID, clientEmail: email, tokenURI: tokenURI)
    }

    /// Validates Twilio signing credentials.
    static func twilio(_ request: TwilioCredentialRequest) throws(RingRelayError) -> TwilioCredential {
        let sid = request.accountSid
        guard sid.count == 34, sid.hasPrefix("AC"), sid.dropFirst(2).allSatisfy(\.isHexDigit) else {
            throw .invalidField("accountSid", "must be the 34-character account SID starting with 'AC'.")
        }
        guard (16...256).contains(request.authToken.count) else {
            throw .invalidField("authToken", "must be the account's auth token (Twilio console → Account info).")
        }
        return TwilioCredential(accountSID: sid, authToken: request.authToken)
    }

    /// Validates a Webex webhook secret.
    static func webex(_ request: WebexCredentialRequest) throws(RingRelayError) -> WebexCredential {
        guard (8...512).contains(request.secret.count) else {
            throw .invalidField("secret", "must be the webhook's secret, 8–512 characters.")
        }
        return WebexCredential(secret: request.secret)
    }

    private static func isAppleID(_ text: String) -> Bool {
        text.count == 10 && text.allSatisfy { $0.isASCII && ($0.isUppercase || $0.isNumber) }
    }
}
