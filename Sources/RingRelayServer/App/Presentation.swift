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
            avatarUrl: call.callerAvatarURL, to: call.callee, media: call.media.rawValue,
            metadata: call.metadata.flatMap { JSONValue(parsing: $0.utf8) ?? (try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8))) },
            createdAt: call.createdAt, ringEndsAt: call.ringDeadline, updatedAt: call.updatedAt, answeredAt: call.answeredAt,
            answeredBy: call.answeredBy, endedAt: call.endedAt, endReason: call.endReason?.rawValue, endedBy: call.endedBy,
            durationSeconds: call.talkTime.map { Int($0.rounded()) }, sealed: call.isSealed ? true : nil, notifyMissed: call.notifyMissed,
            mode: call.group?.mode.rawValue,
            participants: call.group?.members.map {
                CallParticipantResource(
                    identity: $0.identity, state: $0.state.rawValue, answeredBy: $0.answeredBy, answeredAt: $0.answeredAt, endedAt: $0.endedAt)
            },
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
            throw invalid
        }
        return id
    }

    /// A call history cursor: base64url of `<created_at in Unix milliseconds>:<call id>` of the
    /// page's last call, since the history is ordered by creation time first.
    static func encode(_ position: CallHistoryPosition) -> String {
        let millis = Int64((position.createdAt.timeIntervalSince1970 * 1000).rounded())
        return encode("\(millis):\(position.id)")
    }

    /// Reads a call history cursor; anything but one ``encode(_:)-(CallHistoryPosition)`` wrote
    /// (a binding cursor, an edited one) is `422 invalid_cursor`.
    static func decodeCallPosition(_ cursor: String) throws(RingRelayError) -> CallHistoryPosition {
        guard let data = Data(base64URLEncoded: cursor), let text = String(data: data, encoding: .utf8),
            let colon = text.firstIndex(of: ":")
        else { throw invalid }
        let digits = text[..<colon]
        let id = String(text[text.index(after: colon)...])
        // Up to 15 digits: any millisecond until the year 33658, and never an overflow.
        guard (1...15).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }), let millis = Int64(digits),
            ResourceID.isValid(id, prefix: ResourceID.call)
        else { throw invalid }
        return CallHistoryPosition(createdAt: Date(timeIntervalSince1970: TimeInterval(millis) / 1000), id: id)
    }

    private static let invalid = RingRelayError(
        .unprocessable, code: .invalidCursor, "The cursor is not one this server issued; pass nextCursor from the previous page unchanged.")
}
