import Dispatch
import Foundation
import RingRelayKit
import RingRelayWire
import Synchronization

/// What the phone does by itself: the `ringrelay phone` script options.
struct PhoneScript: Sendable {
    /// Answer incoming calls after this delay.
    var autoAnswer: Duration?
    /// Reject incoming calls at once.
    var autoReject: Bool
    /// Call these identities once connected: one, or a ring group of several.
    var call: [String]
    /// How the ring groups the phone places ring: everyone may join (`all`), or the first to answer.
    var ringMode: RingMode
    /// Hang up calls this long after they connected.
    var hangupAfter: Duration?
    /// The media of the calls the phone places.
    var media: CallMedia
    /// The name callees see (inside the box, for a sealed call).
    var displayName: String?
    /// Whether `--call` and `c` calls are sealed.
    var sealed: Bool
}

/// One thing that happened, as `--json` prints it: `{"event":"incoming","callId":…,"from":…}`.
struct PhoneEvent: Encodable, Sendable {
    var event: String
    var callId: String?
    var uuid: String?
    var from: String?
    var to: String?
    var displayName: String?
    var avatarUrl: String?
    var media: String?
    var state: String?
    var reason: String?
    var identity: String?
    var deviceId: String?
    var replayed: Int?
    var retryInMs: Int?
    var message: String?
    var calls: [PhoneCallSummary]?
    var mode: String?
    var participants: [String]?
    var bindingId: String?
    var keyId: String?
    var created: Bool?
    var added: [String]?
    var removed: [String]?
    var changed: [String]?

    init(_ event: String, callId: String? = nil, uuid: UUID? = nil) {
        self.event = event
        self.callId = callId
        self.uuid = uuid?.uuidString
    }
}

/// One call in a `calls` listing.
struct PhoneCallSummary: Encodable, Sendable {
    var callId: String?
    var direction: String
    var remote: String
    var state: String
}

/// Prints the phone's events: text for people, or one JSON object a line, each written at once.
final class PhoneOutput: Sendable {
    /// Whether events are printed as JSON lines.
    let json: Bool
    /// Called once when standard output's reader is gone (`phone … | head`, a test that gave up):
    /// the phone quits then, as a program killed by SIGPIPE would, instead of crashing on the write.
    private let readerGone: @Sendable () -> Void
    private let lock = Mutex(false)
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    init(json: Bool, readerGone: @escaping @Sendable () -> Void = {}) {
        self.json = json
        self.readerGone = readerGone
    }

    /// Prints `event`, as JSON or as `text`.
    func emit(_ event: PhoneEvent, text: @autoclosure () -> String) {
        write(json ? String(decoding: (try? Self.encoder.encode(event)) ?? Data(), as: UTF8.self) : text())
    }

    /// Prints a hint for people; nothing in JSON mode.
    func note(_ text: String) {
        guard !json else { return }
        write(text)
    }

    private func write(_ line: String) {
        let firstFailure = lock.withLock { gone -> Bool in
            guard !gone, !say(line) else { return false }
            gone = true
            return true
        }
        if firstFailure { readerGone() }
    }
}

/// Names for the end reasons, as JSON shows them.
extension CallEndReason {
    /// `remoteEnded`, `answeredElsewhere`, …
    var name: String {
        switch self {
        case .failed: "failed"
        case .remoteEnded: "remoteEnded"
        case .unanswered: "unanswered"
        case .answeredElsewhere: "answeredElsewhere"
        case .declinedElsewhere: "declinedElsewhere"
        }
    }

    /// `remote ended`, `answered elsewhere`, …
    var words: String {
        switch self {
        case .failed: "failed"
        case .remoteEnded: "the other side ended it"
        case .unanswered: "unanswered"
        case .answeredElsewhere: "answered elsewhere"
        case .declinedElsewhere: "declined elsewhere"
        }
    }
}

extension RingMode {
    /// How a ring group rings, as the phone says it after the callees.
    var words: String {
        switch self {
        case .first: "the first to answer takes it"
        case .all: "each joins on answering"
        }
    }
}

extension CallParticipant.State {
    /// What a participant did, after its identity: `joined`, `declined`, `left`, …
    var words: String {
        switch self {
        case .ringing: "rings"
        case .accepted: "joined"
        case .declined: "declined"
        case .busy: "is busy"
        case .unreachable: "could not be reached"
        case .missed: "did not answer"
        case .cancelled: "stopped ringing"
        case .answeredElsewhere: "stopped ringing (someone else answered)"
        case .left: "left"
        case .unknown(let name): "is \(name)"
        }
    }
}

extension SealedInviteRefusal {
    /// `wrongKey`, `tampered`, `expired`, … as JSON shows them.
    var name: String {
        switch self {
        case .malformed: "malformed"
        case .wrongKey: "wrongKey"
        case .tampered: "tampered"
        case .wrongBinding: "wrongBinding"
        case .expired: "expired"
        case .expiresTooLate: "expiresTooLate"
        case .wrongCall: "wrongCall"
        case .replayed: "replayed"
        case .unknownSender: "unknownSender"
        case .unauthenticatedSender: "unauthenticatedSender"
        case .senderKeysUnavailable: "senderKeysUnavailable"
        case .replayStateUnavailable: "replayStateUnavailable"
        case .replayStoreFull: "replayStoreFull"
        }
    }
}

extension CallState {
    /// `ringing`, `connecting`, `connected`, `held`, `ended`.
    var name: String {
        switch self {
        case .ringing: "ringing"
        case .connecting: "connecting"
        case .connected: "connected"
        case .held: "held"
        case .ended: "ended"
        }
    }
}

/// The system call UI of a terminal: prints what CallKit would show. It learns the server's call
/// id of each call from the ``CallManager`` it is attached to.
final class TerminalCallUI: SystemCallUI {
    /// What the terminal remembers of a call it showed, for the lines printed after it ended.
    private struct Shown: Sendable {
        var callId: String?
        var remote: String
    }

    private let output: PhoneOutput
    private let manager = Mutex<CallManager?>(nil)
    private let shown = Mutex<[UUID: Shown]>([:])

    init(output: PhoneOutput) {
        self.output = output
    }

    /// Connects the UI to the calls it shows.
    func attach(_ calls: CallManager) {
        manager.withLock { $0 = calls }
    }

    func reportIncomingCall(_ report: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void) {
        let call = manager.withLock { $0 }?.call(uuid: report.uuid)
        let callId = call?.serverCallId ?? shown.withLock { $0[report.uuid]?.callId }
        let isNew = shown.withLock { shown in
            defer { shown[report.uuid] = Shown(callId: callId, remote: report.caller.displayText) }
            return shown[report.uuid] == nil
        }
        completion(nil)
        guard isNew else { return }
        var event = PhoneEvent("incoming", callId: callId, uuid: report.uuid)
        event.from = report.caller.identity
        event.displayName = report.caller.displayName
        event.avatarUrl = report.caller.avatarURL?.absoluteString
        event.media = report.hasVideo ? "video" : "audio"
        event.state = call?.state.name ?? "ringing"
        output.emit(
            event,
            text: "Incoming \(event.media ?? "audio") call from \(Self.describe(report.caller)) [\(callId ?? "no id")]: "
                + "\(event.state ?? "ringing"). a answer, r reject")
    }

    /// A sealed call's box opened: the caller, name and media it names.
    func reportIncomingCallUpdated(_ report: IncomingCallReport) {
        guard
            let call = shown.withLock({ shown in
                shown[report.uuid]?.remote = report.caller.displayText
                return shown[report.uuid]
            })
        else { return }
        var event = PhoneEvent("opened", callId: call.callId, uuid: report.uuid)
        event.from = report.caller.identity
        event.displayName = report.caller.displayName
        event.avatarUrl = report.caller.avatarURL?.absoluteString
        event.media = report.hasVideo ? "video" : "audio"
        output.emit(
            event,
            text:
                "Sealed call [\(call.callId ?? "no id")] opened: \(event.media ?? "audio") call from \(Self.describe(report.caller)). a answer, r reject"
        )
    }

    func reportOutgoingCallStarted(_ report: OutgoingCallReport) {
        let call = manager.withLock { $0 }?.call(uuid: report.uuid)
        let callId = call?.serverCallId
        let group = call?.participants.map(\.identity) ?? []
        let callees = group.isEmpty ? report.callee.identity : group.joined(separator: ", ")
        shown.withLock { $0[report.uuid] = Shown(callId: callId, remote: group.isEmpty ? report.callee.displayText : callees) }
        var event = PhoneEvent("outgoing", callId: callId, uuid: report.uuid)
        event.to = report.callee.identity
        event.media = report.hasVideo ? "video" : "audio"
        event.state = "ringing"
        event.mode = call?.ringMode?.rawValue
        event.participants = group.isEmpty ? nil : group
        let how = call?.ringMode.map { " (\($0.words))" } ?? ""
        output.emit(event, text: "Calling \(callees)\(how) [\(callId ?? "no id")]: ringing. h cancel")
    }

    func reportOutgoingCallConnected(uuid: UUID) { connected(uuid) }

    func fulfillAnswer(uuid: UUID) { connected(uuid) }

    func failAnswer(uuid: UUID) {
        let call = remembered(uuid)
        output.emit(PhoneEvent("answerFailed", callId: call?.callId, uuid: uuid), text: "Could not answer \(Self.label(call)).")
    }

    func reportCallEnded(uuid: UUID, reason: CallEndReason) {
        ended(uuid, reason: reason.name, words: reason.words)
    }

    func reportCallEndedByUser(uuid: UUID) {
        ended(uuid, reason: "local", words: "ended here")
    }

    func reportCallHeld(uuid: UUID, onHold: Bool) {
        let call = remembered(uuid)
        let name = onHold ? "held" : "resumed"
        output.emit(PhoneEvent(name, callId: call?.callId, uuid: uuid), text: "\(onHold ? "On hold" : "Resumed"): \(Self.label(call))")
    }

    private func connected(_ uuid: UUID) {
        let call = remembered(uuid)
        output.emit(PhoneEvent("connected", callId: call?.callId, uuid: uuid), text: "Connected: \(Self.label(call)). h hang up, o hold")
    }

    private func ended(_ uuid: UUID, reason: String, words: String) {
        let call = shown.withLock { $0.removeValue(forKey: uuid) }
        var event = PhoneEvent("ended", callId: call?.callId, uuid: uuid)
        event.reason = reason
        output.emit(event, text: "Ended: \(Self.label(call)) (\(words))")
    }

    private func remembered(_ uuid: UUID) -> Shown? {
        shown.withLock { $0[uuid] }
    }

    private static func label(_ call: Shown?) -> String {
        guard let call else { return "a call" }
        return "\(call.remote) [\(call.callId ?? "no id")]"
    }

    /// `Alice (alice)`, `alice`, or with a picture `Alice (alice, avatar https://…)`.
    static func describe(_ party: CallParty) -> String {
        let avatar = party.avatarURL.map { "avatar \($0.absoluteString)" }
        return switch (party.displayName, avatar) {
        case (let name?, let avatar?): "\(name) (\(party.identity), \(avatar))"
        case (let name?, nil): "\(name) (\(party.identity))"
        case (nil, let avatar?): "\(party.identity) (\(avatar))"
        case (nil, nil): party.identity
        }
    }
}

/// One `ringrelay phone` session: a ``RingRelayClient`` with a terminal call UI, driven by the
/// keyboard and the script options until `q`, a signal or `--exit-after`.
final class Softphone: Sendable {
    /// A keyboard command.
    enum Command: Equatable {
        case answer, reject, hangUp, holdOrResume, swap, list, quit, help
        /// `c <identity>… [all] [sealed]`: one identity, or a ring group of several; `all` lets
        /// each of them join.
        case call([String], all: Bool, sealed: Bool)
        case unknown(String)

        /// Parses one input line; `nil` for an empty one.
        init?(line: String) {
            let words = line.split(whereSeparator: \.isWhitespace).map(String.init)
            guard let first = words.first?.lowercased() else { return nil }
            switch first {
            case "a": self = .answer
            case "r": self = .reject
            case "h": self = .hangUp
            case "o": self = .holdOrResume
            case "s": self = .swap
            case "l": self = .list
            case "q": self = .quit
            case "?", "help": self = .help
            case "c" where words.count > 1: self = Self.call(Array(words.dropFirst()))
            default: self = .unknown(line)
            }
        }

        /// The identities to call, then the trailing options `all` and `sealed`, in any order.
        private static func call(_ words: [String]) -> Command {
            var callees = words
            var options: Set<String> = []
            while callees.count > 1, let last = callees.last?.lowercased(), last == "all" || last == "sealed" {
                options.insert(last)
                callees.removeLast()
            }
            return .call(callees, all: options.contains("all"), sealed: options.contains("sealed"))
        }
    }

    static let help =
        "a answer, r reject, h hang up, o hold/resume, s swap, c <identity>… [all] [sealed] call (several: a ring group), l list, q quit"

    private let client: RingRelayClient
    private let script: PhoneScript
    private let output: PhoneOutput
    private let sealedKey: PhoneSealedKey?
    /// How long quitting waits for the hang-ups it sends.
    private static let quitWait: Duration = .seconds(5)
    /// Commands sent and not yet answered (a hang-up, an answer): quitting waits for them, so a
    /// call the phone said it ended is ended on the server too.
    private let commandsInFlight = Mutex(0)

    /// - Parameter sealedKey: the phone's key for sealed calls; without it the phone neither
    ///   places nor opens them.
    init(serverURL: URL, signIn: PhoneSignIn, script: PhoneScript, output: PhoneOutput, sealedKey: PhoneSealedKey? = nil) {
        let ui = TerminalCallUI(output: output)
        client = RingRelayClient(
            configuration: .init(
                serverURL: serverURL, deviceId: signIn.deviceId,
                reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(500), maximumDelay: .seconds(10)),
                calls: .init(callbackExecutor: DispatchQueue(label: "ringrelay.phone.calls")),
                sealedCalls: sealedKey?.configuration { change in Self.reportKeyChange(change, to: output) }),
            systemUI: ui,
            accessToken: { try await signIn.accessToken() },
            live: NIOLiveTransport(), bindingStore: sealedKey?.file.bindingStore ?? InMemoryBindingStore())
        ui.attach(client.calls)
        self.script = script
        self.output = output
        self.sealedKey = sealedKey
    }

    // MARK: Sealed calls

    /// Registers the phone's public key, so callers can seal invites to it; nothing without a key.
    ///
    /// The server rings a sealed call only on bindings that carry a key, and a connected device
    /// only through such a binding of its own. A terminal has no push token, so the key rides on
    /// a `live` binding, which is never pushed: the phone rings only while it runs. Its token is
    /// derived from the key (``PhoneKeyFile/bindingToken``), so every run updates one binding and
    /// it keeps its id.
    ///
    /// - Throws: the server's refusal.
    func registerSealedKey() async throws {
        guard let sealedKey else { return }
        let binding = try await client.register(
            token: sealedKey.file.bindingToken, type: .live, publicKey: sealedKey.identity.publicKeyBase64)
        // Phones before `live` bindings put the key on an `apns_voip` binding with a made-up
        // token, which the server pushed to while the phone was away: remove it.
        try await client.unregister(type: .apnsVoIP)
        var event = PhoneEvent("key")
        event.bindingId = binding.id
        event.keyId = sealedKey.identity.keyId.description
        event.created = sealedKey.file.created
        output.emit(
            event,
            text: "Sealed calls: \(sealedKey.file.created ? "made a new key" : "key") \(sealedKey.file.url.path) (id \(event.keyId ?? "")), "
                + "registered on binding \(binding.id).")
    }

    /// Tells the user that a callee's device keys differ from those sealed to before: a new
    /// phone, or someone the server let in (trust on first use).
    private static func reportKeyChange(_ change: DeviceKeyChange, to output: PhoneOutput) {
        func name(_ key: DeviceKeyChange.Key) -> String { "\(key.bindingId) (\(key.deviceId ?? "no device")) \(key.keyId)" }
        let added = change.added.map(name)
        let removed = change.removed.map(name)
        let changed = change.changed.map { "\(name($0.before)) -> \($0.now.keyId)" }
        var event = PhoneEvent("keysChanged")
        event.identity = change.identity
        event.added = added
        event.removed = removed
        event.changed = changed
        let lines = added.map { "  added:   \($0)" } + removed.map { "  removed: \($0)" } + changed.map { "  changed: \($0)" }
        output.emit(
            event,
            text: "\(change.identity)'s device keys changed since your last sealed call to them (a new phone, or someone the server let in):\n"
                + lines.joined(separator: "\n"))
    }

    /// Connects and runs until `q`, the end of standard input, or an element of `quit`; then
    /// hangs up the calls in progress and disconnects.
    ///
    /// - Parameter readingInput: whether commands come from standard input; without it
    ///   (`--no-input`, for scripts and background jobs) only `quit` ends the phone.
    func run(until quit: AsyncStream<String>, readingInput: Bool) async {
        let observation = client.calls.addObserver { [self] event in
            switch event {
            case .incomingCall(let call): incoming(call)
            case .stateChanged(let call, .connected): armHangup(call)
            case .participantsChanged(let call, let changed) where call.direction == .outgoing: participantsChanged(call, changed)
            case .sealedInviteRefused(let call, let refusal): refused(call, refusal)
            default: break
            }
        }
        defer { observation.cancel() }
        let watcher = Task { await watchConnection() }
        await client.connect()
        await withTaskGroup(of: Void.self) { group in
            if readingInput {
                let commands = Self.inputLines()
                group.addTask {
                    // Returns at `q` or at the end of input (Ctrl-D, a closed pipe, /dev/null): both quit.
                    for await line in commands {
                        guard let command = Command(line: line) else { continue }
                        if command == .quit { return }
                        await self.perform(command)
                    }
                }
            }
            group.addTask {
                for await _ in quit { return }
            }
            await group.next()
            group.cancelAll()
        }
        await hangUpForQuit()
        watcher.cancel()
        await client.disconnect()
        output.emit(PhoneEvent("exit"), text: "Bye.")
    }

    // MARK: Connection

    /// Reports the live connection's states; places the scripted call once first connected.
    ///
    /// While the connection is down, the phone says why once (and again when the cause changes),
    /// not at every retry; JSON lines note every retry, with the cause.
    private func watchConnection() async {
        var placedScriptedCall = false
        var lastSaid: String?
        for await state in await client.connectionStates() {
            switch state {
            case .connected(let ready):
                lastSaid = nil
                var event = PhoneEvent("ready")
                event.identity = ready.identity
                event.deviceId = ready.deviceId
                event.replayed = ready.replayed
                output.emit(event, text: "Ready: \(ready.identity) on device \(ready.deviceId). \(Self.help)")
                if !placedScriptedCall, !script.call.isEmpty {
                    placedScriptedCall = true
                    Task { await self.placeCall(to: self.script.call, mode: self.script.ringMode, sealed: self.script.sealed) }
                }
            case .waitingToReconnect(let delay):
                let why = Self.disconnection(await client.connectionFailure, server: client.configuration.serverURL.absoluteString)
                var event = PhoneEvent("disconnected")
                event.retryInMs = Int(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000)
                event.message = why
                if output.json || why != lastSaid {
                    output.emit(event, text: "\(why) Retrying in the background.")
                }
                lastSaid = why
            case .stopped(let closed):
                var event = PhoneEvent("stopped")
                event.reason = closed.closeCode?.reason ?? closed.reason
                event.message = "\(closed.code)"
                output.emit(event, text: "The server closed the connection (\(closed.code) \(event.reason ?? "")); not reconnecting. Type quit.")
            case .connecting, .disconnected:
                break
            }
        }
    }

    /// Why the live connection to `server` is down, in one sentence: the server unreachable (or
    /// another ``ConnectionProblem``), a device token it would not mint, or its close.
    static func disconnection(_ failure: (any Error)?, server: String) -> String {
        switch failure {
        case let failure as ServerConnectionFailure: failure.description
        case let failure as APIError: "The server would not give this phone a device token: \(failure)"
        case let closed as LiveConnectionClosed:
            "The server closed the live connection (\(([String(closed.code), closed.reason]).filter { !$0.isEmpty }.joined(separator: " ")))."
        case let failure?: ConnectionProblem(failure).sentence(server: server)
        case nil: "The live connection to \(server) ended."
        }
    }

    // MARK: Calls

    /// A new incoming call: the script answers or rejects it.
    private func incoming(_ call: Call) {
        if script.autoReject {
            Task { await act(on: call, "reject") { try await call.reject() } }
        } else if let delay = script.autoAnswer {
            Task {
                try? await Task.sleep(for: delay)
                guard call.state == .ringing else { return }
                await act(on: call, "answer") { try await call.answer() }
            }
        }
    }

    /// A call connected (answered, or resumed): `--hangup-after` hangs it up that long after.
    private func armHangup(_ call: Call) {
        guard let hangupAfter = script.hangupAfter else { return }
        Task {
            try? await Task.sleep(for: hangupAfter)
            guard call.state.isInProgress else { return }
            await act(on: call, "hang up") { try await call.end() }
        }
    }

    /// A sealed call's box did not open: the call ends as failed, and the user learns why.
    private func refused(_ call: Call, _ refusal: SealedInviteRefusal) {
        var event = PhoneEvent("refused", callId: call.serverCallId, uuid: call.uuid)
        event.reason = refusal.name
        event.message = refusal.description
        output.emit(event, text: "Sealed call [\(call.serverCallId ?? "no id")] refused: \(refusal.description)")
    }

    /// The callees of a ring group the phone placed answered, declined, missed the ring or left.
    private func participantsChanged(_ call: Call, _ changed: [CallParticipant]) {
        for participant in changed {
            var event = PhoneEvent("participant", callId: call.serverCallId, uuid: call.uuid)
            event.identity = participant.identity
            event.state = participant.state.wireValue
            output.emit(event, text: "\(participant.identity) \(participant.state.words) [\(call.serverCallId ?? "no id")]")
        }
    }

    private func placeCall(to callees: [String], mode: RingMode, sealed: Bool) async {
        let names = callees.joined(separator: ", ")
        do {
            if sealed {
                guard sealedKey != nil else {
                    return reportError("Could not call \(names) sealed: start the phone with --key-file for sealed calls.", callId: nil)
                }
                guard let callee = callees.first, callees.count == 1 else {
                    return reportError("Could not call \(names) sealed: a sealed call rings one identity.", callId: nil)
                }
                _ = try await client.startCall(to: callee, sealed: true, media: script.media, displayName: script.displayName)
            } else {
                _ = try await client.startCall(to: callees, mode: mode, media: script.media, displayName: script.displayName)
            }
        } catch {
            reportError("Could not call \(names): \(Self.describe(error))", callId: nil)
        }
    }

    private func perform(_ command: Command) async {
        let calls = client.calls.calls
        switch command {
        case .answer:
            guard let call = calls.first(where: { $0.direction == .incoming && $0.state == .ringing }) else { return output.note("No call is ringing.") }
            await act(on: call, "answer") { try await call.answer() }
        case .reject:
            guard let call = calls.first(where: { $0.direction == .incoming && $0.state == .ringing }) else { return output.note("No call is ringing.") }
            await act(on: call, "reject") { try await call.reject() }
        case .hangUp:
            let call = calls.first { $0.state == .connected } ?? calls.first { $0.direction == .outgoing && $0.state == .ringing }
                ?? calls.first { $0.state == .held }
            guard let call else { return output.note("No call to hang up.") }
            await act(on: call, "hang up") { try await call.end() }
        case .holdOrResume:
            if let call = calls.first(where: { $0.state == .connected }) {
                await act(on: call, "hold") { try call.hold() }
            } else if let call = calls.last(where: { $0.state == .held }) {
                await act(on: call, "resume") { try call.resume() }
            } else {
                output.note("No call to hold or resume.")
            }
        case .swap:
            if !client.calls.swap() { output.note("No held call to swap to.") }
        case .call(let callees, let all, let sealed):
            await placeCall(to: callees, mode: all ? .all : script.ringMode, sealed: sealed || script.sealed)
        case .list:
            list(calls)
        case .help, .quit:
            output.note(Self.help)
        case .unknown(let line):
            output.note("Unknown command '\(line)'. \(Self.help)")
        }
    }

    private func list(_ calls: [Call]) {
        let summaries = calls.map { call in
            PhoneCallSummary(callId: call.serverCallId, direction: call.direction.rawValue, remote: call.remote.identity, state: call.state.name)
        }
        var event = PhoneEvent("calls")
        event.calls = summaries
        let text = summaries.isEmpty
            ? "No calls."
            : summaries.map { "\($0.direction) \($0.remote) [\($0.callId ?? "no id")]: \($0.state)" }.joined(separator: "\n")
        output.emit(event, text: text)
    }

    /// Runs an action on a call; a failure becomes an `error` event.
    private func act(on call: Call, _ name: String, _ action: () async throws -> Void) async {
        commandsInFlight.withLock { $0 += 1 }
        defer { commandsInFlight.withLock { $0 -= 1 } }
        do {
            try await action()
        } catch {
            reportError("Could not \(name) [\(call.serverCallId ?? "no id")]: \(Self.describe(error))", callId: call.serverCallId)
        }
    }

    /// Quitting hangs up the calls in progress and cancels outgoing calls that ring; incoming
    /// calls that ring keep ringing on the identity's other devices.
    private func hangUpForQuit() async {
        let calls = client.calls.calls.filter { $0.state.isInProgress || $0.state == .connecting || $0.direction == .outgoing }
        await Self.wait(atMost: Self.quitWait) {
            await withTaskGroup(of: Void.self) { group in
                for call in calls {
                    group.addTask { await self.act(on: call, "hang up") { try await call.end() } }
                }
            }
            // Commands started before the quit (a scripted hang-up that just fired) finish too.
            while self.commandsInFlight.withLock({ $0 }) > 0 { try? await Task.sleep(for: .milliseconds(20)) }
        }
    }

    /// Runs `work` and returns when it is done or `limit` has passed, whichever comes first.
    private static func wait(atMost limit: Duration, for work: @escaping @Sendable () async -> Void) async {
        let once = Once()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Task {
                await work()
                if once.claim() { done.resume() }
            }
            Task {
                try? await Task.sleep(for: limit)
                if once.claim() { done.resume() }
            }
        }
    }

    private func reportError(_ message: String, callId: String?) {
        var event = PhoneEvent("error", callId: callId)
        event.message = message
        output.emit(event, text: message)
    }

    private static func describe(_ error: any Error) -> String {
        guard let error = error as? RingRelayError else { return "\(error)" }
        return switch error {
        case .server(let server): server.description
        case .transport(let text), .invalidResponse(let text), .sealedCall(let text): text
        case .invalidCallState(let state): "the call is \(state.name)"
        case .noSignaling: "no server"
        case .tooManyCalls: "too many calls at once"
        }
    }

    // MARK: Input

    /// Standard input, line by line, read on a thread of its own (reading blocks).
    private static func inputLines() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let thread = Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}

/// A flag that can be claimed once, by whichever of several racing tasks comes first.
private final class Once: Sendable {
    private let claimed = Mutex(false)

    /// Whether this caller is the first.
    func claim() -> Bool {
        claimed.withLock { claimed in
            defer { claimed = true }
            return !claimed
        }
    }
}
