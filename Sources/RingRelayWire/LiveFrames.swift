import Foundation

/// The kinds of call event the server sends over a live connection.
public enum CallEventType: String, Sendable, Hashable, CaseIterable, Codable {
    /// A native call rings this device.
    case incoming = "call.incoming"
    /// A provider call (Twilio, Webex) rings this device; the provider payload rides along unchanged.
    case notification = "call.notification"
    /// The caller gave up before an answer.
    case cancelled = "call.cancelled"
    /// Another device of the callee accepted.
    case answeredElsewhere = "call.answered_elsewhere"
    /// Another device of the callee declined.
    case declinedElsewhere = "call.declined_elsewhere"
    /// The callee accepted (to the caller, and to the device that accepted).
    case accepted = "call.accepted"
    /// The callee declined (to the caller, and to the device that declined).
    case rejected = "call.rejected"
    /// The call is over: hung up, or (to the caller) unanswered.
    case ended = "call.ended"
    /// Nobody answered in time (to the callee's devices).
    case missed = "call.missed"
    /// A ring group's participant changed (to the caller's devices): `participant` names it,
    /// `reason` says how (`accepted`, `declined`, `busy`, `unanswered`, `left`). Not an ending: the
    /// call goes on for the others.
    case participantUpdated = "call.participant_updated"

    /// Whether the event announces a new call rather than a change of one.
    public var isRing: Bool { self == .incoming || self == .notification }
}

/// One call event. Every event has an `eventId` the device acknowledges with an ``DeviceFrame/ack(eventId:)``.
///
/// ```json
/// {"type":"call.incoming","eventId":"evt_…","callId":"call_…","call":{…},"sentAt":"…"}
/// ```
public struct CallEvent: Sendable, Hashable, Codable {
    /// What happened.
    public var type: CallEventType
    /// `evt_…`; increases with every event a device is sent.
    public var eventId: String
    /// The call.
    public var callId: String
    /// The call as it is after the change (without deliveries).
    public var call: CallResource
    /// When the server sent the event.
    public var sentAt: Date
    /// For end events: `cancelled`, `answered_elsewhere`, `declined_elsewhere`, `declined`, `unanswered`, `hangup`.
    public var reason: String?
    /// For rings: the callee is already in an accepted call (the app decides hold or swap).
    public var calleeBusy: Bool?
    /// For `call.notification`: `twilio` or `webex`.
    public var provider: String?
    /// For `call.notification`: the provider's payload, unchanged.
    public var payload: JSONValue?
    /// For a sealed call's `call.incoming`: the box sealed to this device's binding, base64 (the
    /// caller's name, media and metadata are inside; `call` says only who and when).
    public var sealed: String?
    /// For a ring group's events to the caller: the participant the event is about.
    public var participant: String?

    /// Creates an event.
    public init(
        type: CallEventType, eventId: String, callId: String, call: CallResource, sentAt: Date, reason: String? = nil,
        calleeBusy: Bool? = nil, provider: String? = nil, payload: JSONValue? = nil, sealed: String? = nil, participant: String? = nil
    ) {
        self.type = type
        self.eventId = eventId
        self.callId = callId
        self.call = call
        self.sentAt = sentAt
        self.reason = reason
        self.calleeBusy = calleeBusy
        self.provider = provider
        self.payload = payload
        self.sealed = sealed
        self.participant = participant
    }
}

/// The first frame on every live connection: the server has registered it.
public struct LiveReady: Sendable, Hashable, Codable {
    /// The identity the access token names.
    public var identity: String
    /// The device the access token names.
    public var deviceId: String
    /// Events re-sent because they were not acknowledged before.
    public var replayed: Int

    /// Creates the frame body.
    public init(identity: String, deviceId: String, replayed: Int) {
        self.identity = identity
        self.deviceId = deviceId
        self.replayed = replayed
    }
}

/// A frame the server sends.
public enum ServerFrame: Sendable, Hashable {
    /// The connection is registered; events follow.
    case ready(LiveReady)
    /// A call event.
    case event(CallEvent)
    /// Answer to a device `ping`.
    case pong
    /// A device frame could not be carried out; the connection stays open.
    case error(ErrorBody.Detail, callId: String?)
}

extension ServerFrame: Codable {
    private enum CodingKeys: String, CodingKey { case type, error, callId }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "ready": self = .ready(try LiveReady(from: decoder))
        case "pong": self = .pong
        case "error":
            self = .error(try container.decode(ErrorBody.Detail.self, forKey: .error), callId: try container.decodeIfPresent(String.self, forKey: .callId))
        default:
            guard CallEventType(rawValue: type) != nil else {
                throw DecodingError.dataCorruptedError(
                    forKey: .type, in: container, debugDescription: "unknown frame type '\(ClientText.echo(type))'")
            }
            self = .event(try CallEvent(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .ready(let ready):
            try container.encode("ready", forKey: .type)
            try ready.encode(to: encoder)
        case .event(let event):
            try event.encode(to: encoder)
        case .pong:
            try container.encode("pong", forKey: .type)
        case .error(let detail, let callId):
            try container.encode("error", forKey: .type)
            try container.encode(detail, forKey: .error)
            try container.encodeIfPresent(callId, forKey: .callId)
        }
    }
}

/// A frame a device sends.
public enum DeviceFrame: Sendable, Hashable {
    /// The device has the event.
    case ack(eventId: String)
    /// Accept a ringing call (callee devices).
    case accept(callId: String)
    /// Decline a ringing call (callee devices).
    case reject(callId: String)
    /// Give up a ringing call (the caller).
    case cancel(callId: String)
    /// Hang up an accepted call (either side).
    case end(callId: String)
    /// Keep-alive; the server answers `pong`.
    case ping
}

/// Why a device frame could not be read.
public struct DeviceFrameError: Error, Sendable, Hashable {
    /// Stable snake_case code sent back in the error frame.
    public var code: String
    /// What is wrong with the frame.
    public var message: String
}

extension DeviceFrame: Codable {
    private enum CodingKeys: String, CodingKey, CaseIterable { case type, eventId, callId }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        func callId() throws -> String { try container.decode(String.self, forKey: .callId) }
        switch type {
        case "ack": self = .ack(eventId: try container.decode(String.self, forKey: .eventId))
        case "accept": self = .accept(callId: try callId())
        case "reject": self = .reject(callId: try callId())
        case "cancel": self = .cancel(callId: try callId())
        case "end": self = .end(callId: try callId())
        case "ping": self = .ping
        default:
            throw DeviceFrameError(
                code: "unknown_frame_type",
                message: "Unknown frame type '\(ClientText.echo(type))'; use ack, accept, reject, cancel, end or ping.")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .ack(let eventId):
            try container.encode("ack", forKey: .type)
            try container.encode(eventId, forKey: .eventId)
        case .accept(let callId), .reject(let callId), .cancel(let callId), .end(let callId):
            try container.encode(command ?? "", forKey: .type)
            try container.encode(callId, forKey: .callId)
        case .ping:
            try container.encode("ping", forKey: .type)
        }
    }

    /// The command's name for call commands (`accept`, `reject`, `cancel`, `end`), else `nil`.
    public var command: String? {
        switch self {
        case .accept: "accept"
        case .reject: "reject"
        case .cancel: "cancel"
        case .end: "end"
        case .ack, .ping: nil
        }
    }
}
