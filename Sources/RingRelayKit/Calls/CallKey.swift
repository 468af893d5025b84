import Crypto
import Foundation

/// What makes two sightings of a call the same call: the id its source gives it.
///
/// A call can arrive twice (over the live connection and by push, or as the same push twice).
/// Both sightings produce the same key, so the SDK keeps one ``Call`` with one ``uuid``.
public enum CallKey: Sendable, Hashable, CustomStringConvertible {
    /// A RingRelay call: its `call_…` id.
    case ringRelay(callId: String)
    /// A Twilio call: its `twi_call_sid`.
    case twilio(callSid: String)
    /// A Webex call: a digest of its push payload, whose inner keys are not documented.
    case webex(payloadDigest: String)
    /// A push nobody can ring: a digest of its content, so a repeated push keeps its UUID.
    case unrecognized(payloadDigest: String)

    public var description: String {
        switch self {
        case .ringRelay(let callId): "ringrelay:\(callId)"
        case .twilio(let callSid): "twilio:\(callSid)"
        case .webex(let digest): "webex:\(digest)"
        case .unrecognized(let digest): "unrecognized:\(digest)"
        }
    }

    /// The UUID the system call UI knows the call by: the same for the same key, on every device
    /// and every launch.
    public var uuid: UUID { UUID(name: description, namespace: Self.namespace) }

    /// The namespace of RingRelay call UUIDs (itself a random UUID, fixed forever).
    static let namespace = UUID(uuid: (0x6B, 0x1F, 0x5C, 0x2E, 0x93, 0x0A, 0x4D, 0x7B, 0xA1, 0x44, 0x2C, 0x85, 0xD9, 0x3E, 0x70, 0x16))
}

extension UUID {
    /// A name-based UUID: SHA-256 of the namespace and the name, laid out as an RFC 9562
    /// version 8 UUID (the RFC's own example of a SHA-256 name-based UUID).
    init(name: String, namespace: UUID) {
        var hasher = SHA256()
        withUnsafeBytes(of: namespace.uuid) { hasher.update(bufferPointer: $0) }
        hasher.update(data: Data(name.utf8))
        var bytes = Array(hasher.finalize().prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        self.init(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
    }
}
