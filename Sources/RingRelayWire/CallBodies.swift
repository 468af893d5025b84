import Foundation

/// One device delivery of a call, as the API shows it.
public struct DeliveryResource: Sendable, Hashable, Codable {
    /// `dlv_…`
    public var id: String
    /// The binding pushed to; absent for a live-connection delivery.
    public var bindingId: String?
    /// The device rung, when known (a live connection's, or the binding's `deviceId`).
    public var deviceId: String?
    /// `websocket`, `apns` or `fcm`.
    public var channel: String
    /// `event` (live connection), `voip`, `alert` or `data`.
    public var kind: String
    /// `pending`, `delivered`, `unacknowledged` (live ring not acked in time; push followed),
    /// `invalidate_binding`, `fix_configuration`, `retry_exhausted` or `drop`.
    public var outcome: String
    /// The push service's HTTP status.
    public var status: Int?
    /// The push service's reason, verbatim.
    public var reason: String?
    /// The push id (`apns-id`, FCM message name).
    public var pushId: String?
    /// Attempts made so far.
    public var attempts: Int
    /// Send-to-answer time of the last attempt.
    public var latencyMs: Double?
    /// When it was planned.
    public var createdAt: Date
    /// When the final answer came.
    public var completedAt: Date?

    /// Creates the body.
    public init(
        id: String, bindingId: String?, deviceId: String? = nil, channel: String, kind: String, outcome: String, status: Int?,
        reason: String?, pushId: String?, attempts: Int, latencyMs: Double?, createdAt: Date, completedAt: Date?
    ) {
        self.id = id
        self.bindingId = bindingId
        self.deviceId = deviceId
        self.channel = channel
        self.kind = kind
        self.outcome = outcome
        self.status = status
        self.reason = reason
        self.pushId = pushId
        self.attempts = attempts
        self.latencyMs = latencyMs
        self.createdAt = createdAt
        self.completedAt = completedAt
    }
}

/// A call as the API shows it.
public struct CallResource: Sendable, Hashable, Codable {
    /// `call_…`
    public var id: String
    /// `twilio`, `webex` or `native`.
    public var source: String
    /// `ringing`, `accepted`, `rejected`, `cancelled`, `ended`, `missed` or `unreachable`.
    public var state: String
    /// The caller as the source named it (for native calls, the caller's identity).
    public var from: String?
    /// The caller's display name, when the caller gave one.
    public var displayName: String?
    /// The caller's picture, an `https` URL, when the caller gave one (see ``AvatarURLRules``).
    public var avatarUrl: String?
    /// The identity rung; for a ring group, the first identity named (``participants`` has them all).
    public var to: String
    /// `audio` or `video`.
    public var media: String
    /// The caller's small JSON object, passed on unchanged.
    public var metadata: JSONValue?
    /// When the call arrived.
    public var createdAt: Date
    /// When ringing stops.
    public var ringEndsAt: Date
    /// When the state last changed.
    public var updatedAt: Date
    /// When a callee device accepted.
    public var answeredAt: Date?
    /// The `deviceId` that accepted.
    public var answeredBy: String?
    /// When the call reached a final state.
    public var endedAt: Date?
    /// Why it ended: `declined`, `cancelled`, `unanswered`, `hangup`.
    public var endReason: String?
    /// The identity whose command ended it (absent for a ring timeout).
    public var endedBy: String?
    /// How long the conversation lasted, from `answeredAt` to `endedAt` in whole seconds
    /// (rounded): only for a call that was answered and has ended. Absent from servers before it.
    public var durationSeconds: Int?
    /// `true` when the caller sealed its invites (the server relays them without reading them).
    public var sealed: Bool?
    /// For a ring group (a call to several identities): `first` or `all`. Absent for a call to one.
    public var mode: String?
    /// For a ring group: every identity rung, in the order the caller named them, with where each
    /// stands. Absent for a call to one identity (``to`` and ``state`` say it all).
    public var participants: [CallParticipantResource]?
    /// The call's own missed-call-notice choice; absent when it follows the account's default.
    public var notifyMissed: Bool?
    /// One entry per device rung, the first 500. Present in `GET /v1/calls/{id}`; absent inside
    /// WebSocket events.
    public var deliveries: [DeliveryResource]?
    /// When the call has more than 500 deliveries: pass as `cursor` to
    /// `GET /v1/calls/{id}/deliveries` for the rest.
    public var deliveriesNextCursor: String?

    /// Creates the body.
    public init(
        id: String, source: String, state: String, from: String?, displayName: String? = nil, avatarUrl: String? = nil, to: String,
        media: String = "audio", metadata: JSONValue? = nil, createdAt: Date, ringEndsAt: Date, updatedAt: Date, answeredAt: Date? = nil,
        answeredBy: String? = nil, endedAt: Date? = nil, endReason: String? = nil, endedBy: String? = nil, durationSeconds: Int? = nil,
        sealed: Bool? = nil, notifyMissed: Bool? = nil, mode: String? = nil, participants: [CallParticipantResource]? = nil,
        deliveries: [DeliveryResource]?
    ) {
        self.id = id
        self.source = source
        self.state = state
        self.from = from
        self.displayName = displayName
        self.avatarUrl = avatarUrl
        self.to = to
        self.media = media
        self.metadata = metadata
        self.createdAt = createdAt
        self.ringEndsAt = ringEndsAt
        self.updatedAt = updatedAt
        self.answeredAt = answeredAt
        self.answeredBy = answeredBy
        self.endedAt = endedAt
        self.endReason = endReason
        self.endedBy = endedBy
        self.durationSeconds = durationSeconds
        self.sealed = sealed
        self.notifyMissed = notifyMissed
        self.mode = mode
        self.participants = participants
        self.deliveries = deliveries
    }
}

/// One identity of a ring group, as the API shows it.
public struct CallParticipantResource: Sendable, Hashable, Codable {
    /// The identity rung.
    public var identity: String
    /// `ringing`, `accepted` (in the call), `declined`, `busy` (not rung: in another call, with
    /// `ifBusy: reject`), `unreachable` (nothing to ring), `missed`, `cancelled` (the ring ended
    /// before it answered), `answered_elsewhere` (mode `first`: another identity answered) or
    /// `left` (it was in the call and hung up).
    public var state: String
    /// The `deviceId` that accepted, once it has.
    public var answeredBy: String?
    /// When it accepted.
    public var answeredAt: Date?
    /// When its part ended.
    public var endedAt: Date?

    /// Creates the body.
    public init(identity: String, state: String, answeredBy: String? = nil, answeredAt: Date? = nil, endedAt: Date? = nil) {
        self.identity = identity
        self.state = state
        self.answeredBy = answeredBy
        self.answeredAt = answeredAt
        self.endedAt = endedAt
    }
}

/// `GET /v1/calls/{id}/deliveries` answer: one page of a call's deliveries, in planning order.
public struct DeliveryList: Sendable, Hashable, Codable {
    public var data: [DeliveryResource]
    /// Pass as `cursor` for the next page; absent on the last page.
    public var nextCursor: String?

    /// Creates the body.
    public init(data: [DeliveryResource], nextCursor: String?) {
        self.data = data
        self.nextCursor = nextCursor
    }
}

/// `GET /v1/calls` answer: one page of the call history, newest first.
public struct CallList: Sendable, Hashable, Codable {
    /// This page. The calls carry no `deliveries`; `GET /v1/calls/{id}` has them.
    public var data: [CallResource]
    /// Pass as `cursor` (with the same filters) for the next page; absent on the last page. With a
    /// `state` filter the server looks at a bounded number of calls per page, so a page can be
    /// short, even empty, and still have a next one.
    public var nextCursor: String?

    /// Creates the body.
    public init(data: [CallResource], nextCursor: String?) {
        self.data = data
        self.nextCursor = nextCursor
    }
}

/// `POST /v1/calls` body: start a native call.
public struct CreateCallRequest: Sendable, Hashable, Codable {
    /// The call's id, chosen by the caller (`call_` and 26 lowercase Crockford base-32
    /// characters, as the server's own ids); the server makes one when it is absent. A caller that
    /// seals invites names the call in each box before placing it, so the callee's SDK can refuse
    /// a box delivered with another call. An id already taken answers 409 `call_id_taken`.
    public var callId: String?
    /// The caller's identity. A device token may omit it (its own identity is used) and may not
    /// name another.
    public var from: String?
    /// The identities to ring: one (the JSON may give it as a string), or a ring group of up to
    /// 20 (a JSON array), rung at once.
    public var to: [String]
    /// For a ring group: `first` (default; the first accept wins, every other device stops ringing)
    /// or `all` (each identity joins on its own while the rest ring on).
    public var mode: String?
    /// `audio` (default) or `video`.
    public var media: String?
    /// Seconds to ring, 5–180, default 45.
    public var ringTimeoutSeconds: Int?
    /// A small JSON object (at most 1 KiB encoded) handed to the callee's devices unchanged.
    public var metadata: JSONValue?
    /// The caller's name as the callee's call screen should show it.
    public var displayName: String?
    /// The caller's picture: an absolute `https` URL with a host, at most 1024 bytes (see
    /// ``AvatarURLRules``). Refused with `sealed`, whose calls the server must not describe in clear.
    public var avatarUrl: String?
    /// End-to-end encrypted invites, one per callee binding with a public key (of any type): only
    /// those bindings ring, and `displayName`, `metadata`, `avatarUrl` and `media` must be absent.
    public var sealed: [SealedInvite]?
    /// `ring` or `reject`: what to do when the callee is in another call; the account's default
    /// (`/v1/settings/calls`) when absent.
    public var ifBusy: String?
    /// Whether the callee's devices that never took the ring live get a "missed call" notification
    /// when it is cancelled or times out; the account's default when absent.
    public var notifyMissed: Bool?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case callId, from, to, mode, media, ringTimeoutSeconds, metadata, displayName, avatarUrl, sealed, ifBusy, notifyMissed
    }

    /// Creates a request to ring one identity.
    public init(
        callId: String? = nil, from: String? = nil, to: String, media: String? = nil, ringTimeoutSeconds: Int? = nil, metadata: JSONValue? = nil,
        displayName: String? = nil, avatarUrl: String? = nil, sealed: [SealedInvite]? = nil, ifBusy: String? = nil, notifyMissed: Bool? = nil
    ) {
        self.init(
            callId: callId, from: from, to: [to], media: media, ringTimeoutSeconds: ringTimeoutSeconds, metadata: metadata,
            displayName: displayName, avatarUrl: avatarUrl, sealed: sealed, ifBusy: ifBusy, notifyMissed: notifyMissed)
    }

    /// Creates a request to ring several identities at once (a ring group) or one.
    public init(
        callId: String? = nil, from: String? = nil, to: [String], mode: String? = nil, media: String? = nil, ringTimeoutSeconds: Int? = nil,
        metadata: JSONValue? = nil, displayName: String? = nil, avatarUrl: String? = nil, sealed: [SealedInvite]? = nil,
        ifBusy: String? = nil, notifyMissed: Bool? = nil
    ) {
        self.callId = callId
        self.from = from
        self.to = to
        self.mode = mode
        self.media = media
        self.ringTimeoutSeconds = ringTimeoutSeconds
        self.metadata = metadata
        self.displayName = displayName
        self.avatarUrl = avatarUrl
        self.sealed = sealed
        self.ifBusy = ifBusy
        self.notifyMissed = notifyMissed
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        callId = try container.decodeIfPresent(String.self, forKey: .callId)
        from = try container.decodeIfPresent(String.self, forKey: .from)
        if let one = try? container.decode(String.self, forKey: .to) {
            to = [one]
        } else {
            to = try container.decode([String].self, forKey: .to)
        }
        mode = try container.decodeIfPresent(String.self, forKey: .mode)
        media = try container.decodeIfPresent(String.self, forKey: .media)
        ringTimeoutSeconds = try container.decodeIfPresent(Int.self, forKey: .ringTimeoutSeconds)
        metadata = try container.decodeIfPresent(JSONValue.self, forKey: .metadata)
        displayName = try container.decodeIfPresent(String.self, forKey: .displayName)
        avatarUrl = try container.decodeIfPresent(String.self, forKey: .avatarUrl)
        sealed = try container.decodeIfPresent([SealedInvite].self, forKey: .sealed)
        ifBusy = try container.decodeIfPresent(String.self, forKey: .ifBusy)
        notifyMissed = try container.decodeIfPresent(Bool.self, forKey: .notifyMissed)
    }

    /// Writes `to` as a string when it names one identity, as servers before ring groups read it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(callId, forKey: .callId)
        try container.encodeIfPresent(from, forKey: .from)
        if to.count == 1 { try container.encode(to[0], forKey: .to) } else { try container.encode(to, forKey: .to) }
        try container.encodeIfPresent(mode, forKey: .mode)
        try container.encodeIfPresent(media, forKey: .media)
        try container.encodeIfPresent(ringTimeoutSeconds, forKey: .ringTimeoutSeconds)
        try container.encodeIfPresent(metadata, forKey: .metadata)
        try container.encodeIfPresent(displayName, forKey: .displayName)
        try container.encodeIfPresent(avatarUrl, forKey: .avatarUrl)
        try container.encodeIfPresent(sealed, forKey: .sealed)
        try container.encodeIfPresent(ifBusy, forKey: .ifBusy)
        try container.encodeIfPresent(notifyMissed, forKey: .notifyMissed)
    }
}

/// An invite sealed by the caller's app to one callee binding's public key (a binding of any
/// type that registered one). The server forwards it without being able to read it.
public struct SealedInvite: Sendable, Hashable, Codable {
    /// The binding it is sealed for.
    public var bindingId: String
    /// The sealed box, base64.
    public var box: String

    enum CodingKeys: String, CodingKey, CaseIterable { case bindingId, box }

    /// Creates an invite.
    public init(bindingId: String, box: String) {
        self.bindingId = bindingId
        self.box = box
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        bindingId = try container.decode(String.self, forKey: .bindingId)
        box = try container.decode(String.self, forKey: .box)
    }
}

/// Optional body of `POST /v1/calls/{id}/accept|reject|cancel|end`. An account key acting for a
/// device names it; a device token needs no body.
public struct CallCommandRequest: Sendable, Hashable, Codable {
    /// The device acting, when an account key sends the command on a device's behalf.
    public var deviceId: String?

    enum CodingKeys: String, CodingKey, CaseIterable { case deviceId }

    /// Creates a request.
    public init(deviceId: String? = nil) { self.deviceId = deviceId }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        deviceId = try container.decodeIfPresent(String.self, forKey: .deviceId)
    }
}

/// Answer to a provider webhook that rang devices.
public struct WebhookRingResponse: Sendable, Hashable, Codable {
    /// The call created (or found again, for a repeated notification).
    public var callId: String
    /// Each device's first answer, or `pending` when it took longer than the server waits: the
    /// first 500.
    public var deliveries: [DeliveryResource]
    /// When the call has more than 500 deliveries: pass as `cursor` to
    /// `GET /v1/calls/{id}/deliveries` for the rest.
    public var deliveriesNextCursor: String?

    /// Creates the body.
    public init(callId: String, deliveries: [DeliveryResource], deliveriesNextCursor: String? = nil) {
        self.callId = callId
        self.deliveries = deliveries
        self.deliveriesNextCursor = deliveriesNextCursor
    }
}

/// Answer to a provider webhook that needs no ring (another resource or event type).
public struct WebhookIgnoredResponse: Sendable, Hashable, Codable {
    /// Why nothing rang.
    public var ignored: String

    /// Creates the body.
    public init(ignored: String) { self.ignored = ignored }
}

/// `GET` and `PATCH /v1/settings/calls`: the account's defaults for the calls it places.
public struct CallSettings: Sendable, Hashable, Codable {
    /// `ring` (the default) or `reject`: what a call to a callee in another call does.
    public var ifBusy: String?
    /// Whether a cancelled or unanswered call sends a "missed call" notification to the callee's
    /// devices that never took the ring live (default `false`).
    public var notifyMissed: Bool?

    enum CodingKeys: String, CodingKey, CaseIterable { case ifBusy, notifyMissed }

    /// Creates the body.
    public init(ifBusy: String? = nil, notifyMissed: Bool? = nil) {
        self.ifBusy = ifBusy
        self.notifyMissed = notifyMissed
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.strictContainer(keyedBy: CodingKeys.self)
        ifBusy = try container.decodeIfPresent(String.self, forKey: .ifBusy)
        notifyMissed = try container.decodeIfPresent(Bool.self, forKey: .notifyMissed)
    }
}

/// A call's state as the server records it: the `state` of a `CallResource` (the server's call
/// rules move a call between them; RingRelayKit reads them back).
public enum CallRecordState: String, Sendable, Hashable, CaseIterable, Codable {
    /// Devices are being rung.
    case ringing
    /// A callee device answered; the call is in progress.
    case accepted
    /// A callee device declined.
    case rejected
    /// The caller gave up before an answer.
    case cancelled
    /// An answered call finished.
    case ended
    /// Nobody answered within the ring timeout.
    case missed
    /// No device of the callee could be reached; nothing rang.
    case unreachable
}
