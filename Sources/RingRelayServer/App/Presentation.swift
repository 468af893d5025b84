import Foundation
import NIOSSL
import RingRelayCore
import RingRelayWire

/// Core values as the API shows them.
extension AccountResource {
    init(_ account: Account) {
        self.init(id: account.id, name: account.name, createdAt: account.createdAt)
    }
}

extension BindingResource {
    init(_ binding: Binding) {
        self.init(
            id: binding.id, identity: binding.identity, type: binding.type.rawValue, token: binding.token,
            environment: binding.environment?.rawValue, deviceId: binding.deviceID, publicKey: binding.publicKey,
            status: binding.status.rawValue, invalidReason: binding.invalidReason, invalidatedAt: binding.invalidatedAt,
            createdAt: binding.createdAt, updatedAt: binding.updatedAt)
    }
}

extension CredentialsResource {
    /// The non-secret summary of an account's credentials.
    init(_ stored: [StoredCredential]) {
        self.init()
        for item in stored {
            switch item.credential {
            case .apns(let apns):
                switch apns.authentication {
                case .token(let teamID, let keyID, _):
                    self.apns = .init(
                        authentication: "token", teamId: teamID, keyId: keyID, topic: apns.topic, certificateExpiresAt: nil, updatedAt: item.updatedAt)
                case .pkcs12(let data, let passphrase):
                    let leaf = (try? NIOSSLPKCS12Bundle(buffer: Array(data), passphrase: Array(passphrase.utf8)))?.certificateChain.first
                    self.apns = .init(
                        authentication: "pkcs12", teamId: nil, keyId: nil, topic: apns.topic,
                        certificateExpiresAt: leaf.map { Date(timeIntervalSince1970: TimeInterval($0.notValidAfter)) },
                        updatedAt: item.updatedAt)
                case .certificate(let certificatePEM, _):
                    let leaf = try? NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)).first
                    self.apns = .init(
                        authentication: "certificate", teamId: nil, keyId: nil, topic: apns.topic,
                        certificateExpiresAt: leaf.map { Date(timeIntervalSince1970: TimeInterval($0.notValidAfter)) },
                        updatedAt: item.updatedAt)
                }
            case .fcm(let fcm):
                self.fcm = .init(projectId: fcm.projectID, clientEmail: fcm.clientEmail, updatedAt: item.updatedAt)
            case .twilio(let twilio):
                self.twilio = .init(accountSid: twilio.accountSID, updatedAt: item.updatedAt)
            case .webex:
                self.webex = .init(updatedAt: item.updatedAt)
            }
        }
    }
}

extension DeliveryResource {
    init(_ delivery: Delivery) {
        self.init(
            id: delivery.id, bindingId: delivery.bindingID, deviceId: delivery.deviceID, channel: delivery.channel.rawValue,
            kind: delivery.kind, outcome: delivery.outcome, status: delivery.status, reason: delivery.reason, pushId: delivery.providerID,
            attempts: delivery.attempts, latencyMs: delivery.latencyMs, createdAt: delivery.createdAt, completedAt: delivery.completedAt)
    }
}

extension CallResource {
    init(_ call: Call, deliveries: [Delivery]?) {
        self.init(
            id: call.id, source: call.source.rawValue, state: call.state.rawValue, from: call.caller, displayName: call.callerName,
            to: call.callee, media: call.media.rawValue, metadata: call.metadata.flatMap { JSONValue(parsing: $0.utf8) ?? (try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8))) },
            createdAt: call.createdAt, ringEndsAt: call.ringDeadline, updatedAt: call.updatedAt, answeredAt: call.answeredAt,
            answeredBy: call.answeredBy, endedAt: call.endedAt, endReason: call.endReason?.rawValue, endedBy: call.endedBy,
            deliveries: deliveries?.map(DeliveryResource.init))
    }
}

/// Opaque pagination cursors: base64url of the last id of a page, so clients never parse them.
enum Cursor {
    static func encode(_ id: String) -> String {
        Data(id.utf8).base64URLEncoded()
    }

    static func decode(_ cursor: String, prefix: String) throws(RingRelayError) -> String {
        guard let data = Data(base64URLEncoded: cursor), let id = String(data: data, encoding: .utf8),
            ResourceID.isValid(id, prefix: prefix)
        else {
            throw RingRelayError(.unprocessable, code: .invalidCursor, "The cursor is not one this server issued; pass nextCursor from the previous page unchanged.")
        }
        return id
    }
}
