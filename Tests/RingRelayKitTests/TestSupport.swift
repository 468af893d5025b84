import Foundation
import RingRelayKit
import RingRelayTesting
import RingRelayWire
import Synchronization

/// Loads the fixtures copied into this test target.
enum Fixture {
    static func data(_ name: String) throws -> Data {
        guard let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures") else {
            throw FixtureError.missing(name)
        }
        return try Data(contentsOf: url)
    }

    /// The fixture as PushKit would hand it over.
    static func dictionary(_ name: String) throws -> [AnyHashable: Any] {
        guard let object = try JSONSerialization.jsonObject(with: data(name)) as? [String: Any] else {
            throw FixtureError.notAnObject(name)
        }
        return object
    }

    static func json(_ name: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: data(name))
    }

    enum FixtureError: Error {
        case missing(String)
        case notAnObject(String)
    }
}

/// Runs callbacks at once, on the caller's thread: keeps tests deterministic.
struct InlineExecutor: CallbackExecutor {
    func execute(_ work: @escaping @Sendable () -> Void) { work() }
}

/// A system call UI that records what the SDK told it.
final class RecordingSystemUI: SystemCallUI {
    enum Record: Sendable, Hashable {
        case incoming(IncomingCallReport)
        case updated(IncomingCallReport)
        case outgoingStarted(OutgoingCallReport)
        case outgoingConnected(UUID)
        case ended(UUID, CallEndReason)
        case endedByUser(UUID)
        case held(UUID, Bool)
        case muted(UUID, Bool)
        case fulfilled(UUID)
        case failed(UUID)
    }

    struct Refusal: Error {}

    private let state = Mutex<[Record]>([])
    /// When set, incoming reports for this UUID are refused, as Do Not Disturb does.
    let refusedUUID = Mutex<UUID?>(nil)

    var records: [Record] { state.withLock { $0 } }

    var incomingReports: [IncomingCallReport] {
        records.compactMap { if case .incoming(let report) = $0 { report } else { nil } }
    }

    func endReasons(for uuid: UUID) -> [CallEndReason] {
        records.compactMap { if case .ended(uuid, let reason) = $0 { reason } else { nil } }
    }

    func count(_ record: Record) -> Int { records.filter { $0 == record }.count }

    private func append(_ record: Record) { state.withLock { $0.append(record) } }

    func reportIncomingCall(_ report: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void) {
        append(.incoming(report))
        completion(refusedUUID.withLock { $0 } == report.uuid ? Refusal() : nil)
    }

    func reportIncomingCallUpdated(_ report: IncomingCallReport) { append(.updated(report)) }
    func reportOutgoingCallStarted(_ report: OutgoingCallReport) { append(.outgoingStarted(report)) }
    func reportOutgoingCallConnected(uuid: UUID) { append(.outgoingConnected(uuid)) }
    func reportCallEnded(uuid: UUID, reason: CallEndReason) { append(.ended(uuid, reason)) }
    func reportCallEndedByUser(uuid: UUID) { append(.endedByUser(uuid)) }
    func reportCallHeld(uuid: UUID, onHold: Bool) { append(.held(uuid, onHold)) }
    func reportCallMuted(uuid: UUID, muted: Bool) { append(.muted(uuid, muted)) }
    func fulfillAnswer(uuid: UUID) { append(.fulfilled(uuid)) }
    func failAnswer(uuid: UUID) { append(.failed(uuid)) }
}

/// A fixed clock the tests move by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>

    init(_ start: Date) { current = Mutex(start) }

    var now: Date { current.withLock { $0 } }

    func set(_ date: Date) { current.withLock { $0 = date } }
}

/// Waits until `condition` holds, polling; fails the wait after `timeout`.
func eventually(
    timeout: Duration = .seconds(20), _ condition: @Sendable () async -> Bool
) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return await condition()
}

/// Fixed dates the fixtures use.
enum Dates {
    /// 2030-01-01T12:00:00Z, when the fixture invites were sent.
    static let sent = Date(timeIntervalSince1970: 1_893_499_200)
    /// While the fixture invites still ring.
    static let ringing = sent.addingTimeInterval(10)
    /// After the fixture invites expired.
    static let expired = sent.addingTimeInterval(46)
}

extension CallManager {
    /// A manager with an inline executor and a fixed clock, for scenarios without a server.
    static func testing(
        ui: RecordingSystemUI, maximumCalls: Int = 2, now: Date = Dates.ringing, signaling: (any CallSignaling)? = nil
    ) -> CallManager {
        CallManager(
            systemUI: ui, signaling: signaling,
            configuration: Configuration(maximumCalls: maximumCalls, callbackExecutor: InlineExecutor(), now: { now }))
    }
}

/// Builds RingRelay pushes and events.
enum Make {
    static func invite(
        _ callId: String, from identity: String = "alice", avatarUrl: Any? = nil, expiresAt: Date = Dates.expired, calleeBusy: Bool? = nil
    ) -> [AnyHashable: Any] {
        var from: [String: Any] = ["identity": identity, "displayName": identity.capitalized]
        if let avatarUrl { from["avatarUrl"] = avatarUrl }
        var invite: [String: Any] = [
            "v": 1, "callId": callId, "from": from, "media": "audio", "sentAt": iso(Dates.sent), "expiresAt": iso(expiresAt),
        ]
        if let calleeBusy { invite["calleeBusy"] = calleeBusy }
        return ["aps": [String: Any](), "ringrelay": invite]
    }

    static func call(
        _ callId: String, state: String = "ringing", from: String = "alice", avatarUrl: String? = nil, to: String = "bob",
        answeredBy: String? = nil
    ) -> CallResource {
        CallResource(
            id: callId, source: "native", state: state, from: from, displayName: from.capitalized, avatarUrl: avatarUrl, to: to, media: "audio",
            createdAt: Dates.sent, ringEndsAt: Dates.expired, updatedAt: Dates.sent, answeredBy: answeredBy, deliveries: nil)
    }

    static func event(
        _ type: CallEventType, _ eventId: String, callId: String, state: String = "ringing", avatarUrl: String? = nil, reason: String? = nil,
        calleeBusy: Bool? = nil, provider: String? = nil, payload: JSONValue? = nil
    ) -> CallEvent {
        CallEvent(
            type: type, eventId: eventId, callId: callId, call: call(callId, state: state, avatarUrl: avatarUrl), sentAt: Dates.sent, reason: reason,
            calleeBusy: calleeBusy, provider: provider, payload: payload)
    }

    /// A ring group's call from Alice: `parts` in the order named, each `identity: state`.
    static func groupCall(
        _ callId: String, state: String = "ringing", mode: String = "all", parts: KeyValuePairs<String, String>, answeredBy: String? = nil
    ) -> CallResource {
        var call = Make.call(callId, state: state, to: parts.first?.key ?? "bob", answeredBy: answeredBy)
        call.mode = mode
        call.participants = parts.map { CallParticipantResource(identity: $0.key, state: $0.value) }
        return call
    }

    /// An event about a ring group's call.
    static func groupEvent(
        _ type: CallEventType, _ eventId: String, _ call: CallResource, participant: String? = nil, reason: String? = nil
    ) -> CallEvent {
        CallEvent(type: type, eventId: eventId, callId: call.id, call: call, sentAt: Dates.sent, reason: reason, participant: participant)
    }

    static func iso(_ date: Date) -> String { date.formatted(.iso8601) }

    static func json(_ value: some Encodable) -> String {
        String(decoding: (try? JSONEncoder.ringRelay.encode(value)) ?? Data(), as: UTF8.self)
    }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let value = Mutex(0)

    /// Increments and returns the new value.
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
