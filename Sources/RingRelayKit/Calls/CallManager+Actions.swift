import Foundation
import RingRelayWire
import Synchronization

extension CallManager {
    // MARK: Answer

    /// Answers the incoming call with this UUID: what a system UI bridge calls when the user taps
    /// Answer. The answer is fulfilled (``SystemCallUI/fulfillAnswer(uuid:)``) once the server
    /// confirms, or failed when the call was lost.
    public func answer(uuid: UUID, origin: ActionOrigin = .systemUI) async throws(RingRelayError) {
        guard let call = call(uuid: uuid) else {
            systemUI.failAnswer(uuid: uuid)
            throw .invalidCallState(.ended(nil))
        }
        try await answer(call, origin: origin)
    }

    func answer(_ call: Call, origin: ActionOrigin) async throws(RingRelayError) {
        switch call.state {
        case .connected, .held:
            systemUI.fulfillAnswer(uuid: call.uuid)
            return
        case .connecting:
            return  // The answer already on its way fulfils or fails the system's action.
        case .ringing where call.direction == .incoming:
            break
        case .ringing, .ended:
            systemUI.failAnswer(uuid: call.uuid)
            throw .invalidCallState(call.state)
        }
        guard call.transition(to: .connecting, if: { $0 == .ringing }) != nil else {
            throw .invalidCallState(call.state)
        }
        holdConnectedCalls(except: call)
        if let signaling, let callId = call.serverCallId {
            do {
                _ = try await signaling.send(.accept, callId: callId)
            } catch {
                let reason = error.serverError.flatMap { $0.kind == .conflict ? CallEndReason(lostCallState: $0.callState ?? "") : nil }
                finish(call, reason: reason ?? .failed, reportToSystem: true)
                throw error
            }
        }
        confirmAnswer(call)
        if call.state.isEnded { throw .invalidCallState(call.state) }
    }

    /// The server confirmed this device's answer (command answer or `call.accepted` event).
    func confirmAnswer(_ call: Call) {
        if call.transition(to: .connected, if: { $0 == .connecting }) != nil {
            systemUI.fulfillAnswer(uuid: call.uuid)
        }
    }

    // MARK: Reject and end

    func reject(_ call: Call, origin: ActionOrigin) async throws(RingRelayError) {
        guard call.direction == .incoming, call.state == .ringing else {
            if call.state.isEnded { return }
            throw .invalidCallState(call.state)
        }
        finish(call, reason: nil, reportToSystem: origin == .app)
        try await send(.reject, for: call)
    }

    /// Ends the call with this UUID: what a system UI bridge calls when the user taps End or Decline.
    public func end(uuid: UUID, origin: ActionOrigin = .systemUI) async throws(RingRelayError) {
        guard let call = call(uuid: uuid) else { return }
        try await end(call, origin: origin)
    }

    func end(_ call: Call, origin: ActionOrigin) async throws(RingRelayError) {
        let state = call.state
        switch state {
        case .ended:
            return
        case .ringing where call.direction == .incoming:
            try await reject(call, origin: origin)
        case .ringing:
            if finish(call, reason: nil, reportToSystem: origin == .app) { try await send(.cancel, for: call) }
        case .connecting:
            // The accept may or may not have reached the server: decline, or hang up if it had.
            if finish(call, reason: nil, reportToSystem: origin == .app) {
                do throws(RingRelayError) {
                    try await send(.reject, for: call, ignoringConflict: false)
                } catch where error.serverError?.kind == .conflict {
                    try await send(.end, for: call)
                }
            }
        case .connected, .held:
            if finish(call, reason: nil, reportToSystem: origin == .app) { try await send(.end, for: call) }
        }
    }

    /// Sends a command for a call the server knows; a conflict (the call moved on) is no failure
    /// for a call that is over here anyway.
    private func send(_ command: CallCommand, for call: Call, ignoringConflict: Bool = true) async throws(RingRelayError) {
        guard let signaling, let callId = call.serverCallId else { return }
        do {
            _ = try await signaling.send(command, callId: callId)
        } catch where ignoringConflict && error.serverError?.kind == .conflict {
            return
        }
    }

    // MARK: Hold

    /// Puts the call with this UUID on hold or resumes it: what a system UI bridge calls for the
    /// system's hold action.
    public func setHeld(uuid: UUID, onHold: Bool, origin: ActionOrigin = .systemUI) throws(RingRelayError) {
        guard let call = call(uuid: uuid) else { throw .invalidCallState(.ended(nil)) }
        try setHeld(call, onHold, origin: origin)
    }

    func setHeld(_ call: Call, _ onHold: Bool, origin: ActionOrigin) throws(RingRelayError) {
        guard call.state.isInProgress else { throw .invalidCallState(call.state) }
        if onHold {
            if call.transition(to: .held, if: { $0 == .connected }) != nil, origin == .app {
                systemUI.reportCallHeld(uuid: call.uuid, onHold: true)
            }
        } else {
            holdConnectedCalls(except: call)
            if call.transition(to: .connected, if: { $0 == .held }) != nil, origin == .app {
                systemUI.reportCallHeld(uuid: call.uuid, onHold: false)
            }
        }
    }

    /// Swaps calls: resumes the most recent held call and holds the connected one.
    ///
    /// - Returns: whether there was a held call to swap to.
    @discardableResult
    public func swap() -> Bool {
        guard let held = calls.last(where: { $0.state == .held }) else { return false }
        return (try? setHeld(held, false, origin: .app)) != nil
    }

    /// Holds every connected call but `call`; only one call is connected at a time.
    func holdConnectedCalls(except call: Call) {
        for other in calls where other !== call {
            if other.transition(to: .held, if: { $0 == .connected }) != nil {
                systemUI.reportCallHeld(uuid: other.uuid, onHold: true)
            }
        }
    }

    // MARK: Outgoing

    /// Calls `callee` (an identity of this account): the server rings all the callee's devices.
    /// A connected call is put on hold.
    ///
    /// - Parameters:
    ///   - callee: the identity to ring.
    ///   - media: audio or video.
    ///   - displayName: this caller's name, as the callee's call screen shows it.
    ///   - avatarURL: this caller's picture, for the callee's app to show: an `https` URL of at
    ///     most 1024 bytes (the server refuses anything else with a 422 `invalid_field`).
    ///   - metadata: a small JSON object handed to the callee's devices unchanged.
    ///   - options: busy handling and missed-call notices, where not the account's defaults.
    /// - Returns: the call, ringing (or already ended as unanswered when the callee is busy and
    ///   `options.ifBusy` is `.reject`); it connects when the callee answers.
    /// - Throws: ``RingRelayError/noSignaling`` without a server, ``RingRelayError/tooManyCalls``
    ///   at the limit, or the server's error.
    public func startCall(
        to callee: String, media: CallMedia = .audio, displayName: String? = nil, avatarURL: URL? = nil, metadata: JSONValue? = nil,
        options: CallOptions = CallOptions()
    ) async throws(RingRelayError) -> Call {
        try await startCall(
            to: [callee], mode: .first, media: media, displayName: displayName, avatarURL: avatarURL, metadata: metadata, options: options)
    }

    /// Calls several identities of this account at once, a ring group (or one, as
    /// ``startCall(to:media:displayName:avatarURL:metadata:options:)`` does): the server rings all
    /// their devices. A connected call is put on hold.
    ///
    /// The call connects when the first callee answers. In mode ``RingMode/first`` that callee
    /// has the call and every other device stops ringing. In mode ``RingMode/all`` the others
    /// ring on and join as they answer; the call ends when this device hangs up or the last one
    /// in it leaves. ``Call/participants`` says where each callee stands, and observers hear each
    /// change (``Event/participantsChanged(_:changed:)``).
    ///
    /// ```swift
    /// let call = try await calls.startCall(to: ["bob", "carol", "dave"], mode: .all, displayName: "Alice")
    /// for await update in call.updates() {
    ///     if case .participantsChanged(let changed) = update { show(changed) }  // "Carol joined"
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - callees: the identities to ring, at most 20, each once, not this device's own.
    ///   - mode: how a ring group rings (``RingMode/first`` by default); ignored for one callee.
    ///   - media: audio or video.
    ///   - displayName: this caller's name, as the callee's call screen shows it.
    ///   - avatarURL: this caller's picture, for the callee's app to show: an `https` URL of at
    ///     most 1024 bytes (the server refuses anything else with a 422 `invalid_field`).
    ///   - metadata: a small JSON object handed to the callee's devices unchanged.
    ///   - options: busy handling (for each callee) and missed-call notices, where not the
    ///     account's defaults.
    /// - Returns: the call, ringing (or already ended as unanswered when every callee is busy and
    ///   `options.ifBusy` is `.reject`).
    /// - Throws: ``RingRelayError/noSignaling`` without a server, ``RingRelayError/tooManyCalls``
    ///   at the limit, or the server's error (422 `invalid_field` for an empty, repeated or too
    ///   long list).
    public func startCall(
        to callees: [String], mode: RingMode = .first, media: CallMedia = .audio, displayName: String? = nil, avatarURL: URL? = nil,
        metadata: JSONValue? = nil, options: CallOptions = CallOptions()
    ) async throws(RingRelayError) -> Call {
        guard let signaling else { throw .noSignaling }
        return try await placeCall { () async throws(RingRelayError) in
            try await signaling.createCall(
                to: callees, mode: mode, media: media, displayName: displayName, avatarURL: avatarURL, metadata: metadata, options: options)
        } describedAs: { resource in
            Call.Info(placed: resource, media: CallMedia(wireValue: resource.media), metadata: resource.metadata)
        }
    }

    /// Places a call with `create` (`POST /v1/calls`) and tracks it: a plain call, or a sealed
    /// one, whose server record does not say what the caller sealed.
    ///
    /// - Parameter describe: the call's details, from the server's answer and what the caller knows.
    func placeCall(
        _ create: () async throws(RingRelayError) -> CallResource, describedAs describe: (CallResource) -> Call.Info
    ) async throws(RingRelayError) -> Call {
        guard calls.count < configuration.maximumCalls else { throw .tooManyCalls }
        let resource = try await create()
        let key = CallKey.ringRelay(callId: resource.id)
        let info = describe(resource)
        let call = Call(
            key: key, direction: .outgoing, source: .ringRelay, info: info, manager: self, executor: configuration.callbackExecutor)
        let early = table.withLock { table in
            table.calls.append(call)
            table.keysByServerId[resource.id] = key
            // What happened to the call before the server's answer got here (an answer, a hang-up).
            defer { table.early.removeAll { $0.event.callId == resource.id } }
            return table.early.filter { $0.event.callId == resource.id }.map(\.event)
        }
        publish(.outgoingCall(call))
        holdConnectedCalls(except: call)
        systemUI.reportOutgoingCallStarted(OutgoingCallReport(uuid: call.uuid, callee: call.remote, hasVideo: call.media == .video))
        call.announceRinging()
        if resource.state == "rejected" {
            // Refused before it rang (the callee is busy and the call asked not to ring then).
            _ = finish(call, reason: CallEndReason(outgoingRejection: resource.endReason), reportToSystem: true)
        }
        for event in early { handle(event) }
        return call
    }
}
