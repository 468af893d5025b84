import Foundation
import Logging
import RingRelayCore
import RingRelayWire

/// Native calls: starts them, applies participants' commands by the rules of ``CallRules`` and
/// tells every device what changed over its live connection.
///
/// REST routes, WebSocket commands and the ring-timeout sweep all go through here, so a command
/// has the same effect whichever way it arrives.
struct CallService: Sendable {
    let store: any DataStore
    let ringer: Ringer
    /// Sends the events of each change to the devices, on this instance and the others.
    let cluster: ClusterSync
    /// Tells the callee's offline devices about rings that ended unanswered.
    let notifier: MissedCallNotifier
    let clock: any WallClock
    let metrics: ServerMetrics
    let logger: Logger

    /// Largest `metadata` object, encoded.
    static let maxMetadataBytes = 1024
    /// Longest `displayName`, in characters and in UTF-8 bytes.
    static let maxDisplayNameLength = 128
    static let maxDisplayNameBytes = 512
    /// Largest sealed box, base64.
    static let maxSealedBoxLength = 3072
    /// Most sealed invites in one call: five boxes for each callee of the largest ring group
    /// (a device has one or two bindings), or all of them for one callee.
    static let maxSealedInvites = 5 * RingGroup.maxMembers

    // MARK: Start

    /// Starts a native call and rings the callee.
    ///
    /// - Throws: 403 when a device names another caller, 422 for invalid fields, 404
    ///   `no_reachable_device` when the callee has neither a live connection nor a binding (the call
    ///   is kept as `unreachable`).
    func start(_ request: CreateCallRequest, scope: AccountScope) async throws -> Ringer.Result {
        let from: String
        switch (scope.identity, request.from) {
        case (let identity?, nil): from = identity
        case (let identity?, let named?):
            guard named == identity else {
                throw RingRelayError.forbidden("A device may only start calls as its own identity '\(ClientText.echo(identity))'.")
            }
            from = named
        case (nil, let named?): from = named
        case (nil, nil): throw RingRelayError.missingField("from")
        }
        try BindingRules.validateIdentity(from, field: "from")
        let callees = try Self.callees(request.to, caller: from)
        let mode = try request.mode.map(Self.ringMode)
        let media = try Self.media(request.media)
        let ringSeconds = request.ringTimeoutSeconds ?? 45
        guard (5...180).contains(ringSeconds) else { throw RingRelayError.invalidField("ringTimeoutSeconds", "must be between 5 and 180.") }
        let metadata = try Self.metadata(request.metadata)
        if let name = request.displayName {
            try BindingRules.validateDisplayText(
                name, field: "displayName", maxCharacters: Self.maxDisplayNameLength, maxBytes: Self.maxDisplayNameBytes)
        }
        if let avatarURL = request.avatarUrl { try Self.validateAvatarURL(avatarURL, sealed: request.sealed != nil) }
        // An empty `sealed` would silently make a plain call of one its caller meant to seal.
        if request.sealed?.isEmpty == true {
            throw RingRelayError.invalidField("sealed", "must hold at least one invite; leave it out for a plain call.")
        }
        let invites = request.sealed ?? []
        try Self.validateSealed(invites)
        var sealed: [(binding: Binding, box: String)] = []
        if !invites.isEmpty {
            // A sealed call carries no plaintext about the caller: what it would say goes in the boxes.
            if request.media != nil {
                throw RingRelayError.invalidField("media", "must not be given with 'sealed': put it inside the sealed invites.")
            }
            if request.displayName != nil {
                throw RingRelayError.invalidField("displayName", "must not be given with 'sealed': put it inside the sealed invites.")
            }
            if request.metadata != nil {
                throw RingRelayError.invalidField("metadata", "must not be given with 'sealed': put it inside the sealed invites.")
            }
            sealed = try await Self.sealedBindings(invites, callees: callees, accountID: scope.accountID, store: store)
        }
        let ifBusy = try request.ifBusy.map(Self.busyPolicy)
        // A caller that seals invites names the call in each box, so it picks the id itself.
        if let callId = request.callId, !ResourceID.isValid(callId, prefix: ResourceID.call) {
            throw RingRelayError.invalidField("callId", "must be a call id: call_ and 26 lowercase Crockford base-32 characters.")
        }

        let now = clock.now
        let call = Call(
            id: request.callId ?? ResourceID.make(ResourceID.call, at: now), accountID: scope.accountID, source: .native, caller: from,
            callerName: request.displayName, callerAvatarURL: request.avatarUrl, callee: callees[0], media: media, metadata: metadata,
            state: .ringing, externalID: nil, createdAt: now, ringDeadline: now.addingTimeInterval(TimeInterval(ringSeconds)), updatedAt: now,
            notifyMissed: request.notifyMissed, isSealed: !invites.isEmpty,
            group: callees.count > 1 ? RingGroup(mode: mode ?? .first, members: callees.map { CallParticipant(identity: $0) }) : nil)
        var result: Ringer.Result
        switch try await ringer.create(call) {
        case .existing(let existing):
            result = try await ringer.replay(existing)
        case .created(var created, let busy):
            // The account's default is read only when it matters: a callee is in a call.
            var policy = ifBusy ?? .ring
            if !busy.isEmpty, ifBusy == nil { policy = try await store.callDefaults(accountID: scope.accountID).ifBusy }
            if !busy.isEmpty, policy == .reject {
                if created.group == nil { return try await refuseBusy(created) }
                created = try await updateGroup(created) { GroupCallRules.refuse(busy: busy, in: $0, at: now) }?.call ?? created
                guard created.state == .ringing else { return Ringer.Result(call: created, deliveries: [], replayed: false) }
            }
            // The invite tells each callee's app whether it is busy, which creating the call found out.
            let ringing = created.group.map { $0.members.filter { $0.state == .ringing }.map(\.identity) } ?? [created.callee]
            let rung = ringing.map { identity in
                Ringer.Callee(
                    identity: identity, busy: busy.contains(identity),
                    content: Self.content(
                        for: created, metadata: request.metadata, calleeBusy: busy.contains(identity),
                        sealed: sealed.filter { $0.binding.identity == identity }, sentAt: now))
            }
            let (rang, unreachable) = try await ringer.ring(created, callees: rung, waitAtMost: nil)
            result = rang
            if rang.call.state != .unreachable, !unreachable.isEmpty,
                let marked = try await updateGroup(created, { GroupCallRules.unreachable(unreachable, in: $0, at: now) })
            {
                result.call = marked.call
            }
        }
        if result.call.state == .unreachable {
            let named =
                callees.count == 1
                ? "The identity '\(ClientText.echo(callees[0]))' has no live connection and no active binding"
                : "None of the \(callees.count) identities has a live connection or an active binding"
            throw RingRelayError(.notFound, code: .noReachableDevice, "\(named) this call can ring in this account.")
        }
        return result
    }

    /// Ends a new call whose callee is busy before anything rings (`ifBusy: reject`): `rejected`
    /// with reason `busy`, told to the caller's devices only.
    private func refuseBusy(_ call: Call) async throws -> Ringer.Result {
        guard let refused = try await store.transitionCall(CallRules.busy(call, at: clock.now)) else {
            // Something changed the call in between (nothing rang, so hardly): report it as it is.
            return Ringer.Result(call: try await store.call(id: call.id, accountID: call.accountID) ?? call, deliveries: [], replayed: false)
        }
        logger.info("callee busy; not ringing", metadata: ["account.id": .string(call.accountID), "call.id": .string(call.id)])
        record(refused)
        await cluster.publish(CallRules.events(after: refused, actingDevice: nil), call: refused)
        return Ringer.Result(call: refused, deliveries: [], replayed: false)
    }

    /// The ring in every channel's form: the native invite for VoIP and FCM and `call.incoming`
    /// over live connections; for a sealed call, each boxed binding's own box instead (and nothing
    /// about the caller), in its channel's form, and on a connected device's live ring the box of
    /// its binding.
    static func content(
        for call: Call, metadata: JSONValue?, calleeBusy: Bool, sealed: [(binding: Binding, box: String)], sentAt: Date
    ) -> RingContent {
        var content = RingContent()
        content.liveEvent = .incoming
        // Decided by the call, not by the boxes at hand: a ring group's identity without a box
        // gets nothing, never the plain invite.
        guard call.isSealed else {
            let invite = NativeInvite(
                callId: call.id, from: .init(identity: call.caller ?? "", displayName: call.callerName, avatarUrl: call.callerAvatarURL),
                media: call.media.rawValue, sentAt: sentAt, expiresAt: call.ringDeadline, metadata: metadata,
                calleeBusy: calleeBusy ? true : nil)
            let inviteJSON = invite.jsonText
            content.apnsVoIP = Array(#"{"aps":{},"ringrelay":\#(inviteJSON)}"#.utf8)
            content.fcmData = [NativeInvite.payloadKey: inviteJSON]
            return content
        }
        var pushes: [String: BindingPusher.Payload] = [:]
        for (binding, box) in sealed {
            let invite = NativeInvite(
                callId: call.id, from: nil, media: nil, sentAt: sentAt, expiresAt: call.ringDeadline, calleeBusy: calleeBusy ? true : nil,
                sealed: box
            ).jsonText
            switch binding.type {
            case .apnsVoIP:
                pushes[binding.id] = .apns(Array(#"{"aps":{},"ringrelay":\#(invite)}"#.utf8))
            case .apnsAlert:
                // A neutral text: the extension replaces it with what the sealed box says.
                pushes[binding.id] = .apns(
                    Array(#"{"aps":{"alert":{"title":"Incoming call"},"mutable-content":1},"ringrelay":\#(invite)}"#.utf8))
            case .fcm:
                pushes[binding.id] = .fcm([NativeInvite.payloadKey: invite])
            case .live:
                break  // Never pushed: its box goes only to the device's live ring, below.
            }
            // A device with several boxed bindings rings live once, with the first one's box.
            if let deviceID = binding.deviceID, content.sealedLive[deviceID] == nil { content.sealedLive[deviceID] = box }
        }
        content.sealedBindingIDs = Set(sealed.map(\.binding.id))
        content.sealedPushes = pushes
        return content
    }

    // MARK: Commands

    /// Applies a participant's command.
    ///
    /// - Returns: the call after the change.
    /// - Throws: 404 for a call the actor may not see, 403 for the wrong role, 409 with the current
    ///   state when the call has moved on (the first accept wins; a later one gets 409 `accepted`).
    func apply(_ command: CallCommand, callID: String, accountID: String, actor: CallActor) async throws -> Call {
        guard let call = try await store.call(id: callID, accountID: accountID) else { throw RingRelayError.notFound("call", id: callID) }
        let now = clock.now
        if call.group != nil {
            do {
                let changed = try await updateGroup(call) { try GroupCallRules.change(for: command, on: $0, by: actor, at: now) }
                logger.info(
                    "ring group call \(command.rawValue)",
                    metadata: ["call.id": .string(callID), "account.id": .string(accountID), "call.state": .string(changed?.call.state.rawValue ?? "")])
                return changed?.call ?? call
            } catch let error as RingRelayError {
                // The ring is over but the sweep has not marked it yet: do it now, then answer.
                if error.kind == .conflict, now >= call.ringDeadline { await expire(call) }
                throw error
            }
        }
        let change: CallChange
        do {
            change = try CallRules.change(for: command, on: call, by: actor, at: now)
        } catch {
            // The ring is over but the sweep has not marked it yet: do it now, then answer.
            if error.kind == .conflict, call.state == .ringing, now >= call.ringDeadline { await expire(call) }
            throw error
        }
        guard let changed = try await store.transitionCall(change) else {
            // Another change won in the meantime (or the ring just ran out): report the state now.
            guard let current = try await store.call(id: callID, accountID: accountID) else { throw RingRelayError.notFound("call", id: callID) }
            if current.state == .ringing, now >= current.ringDeadline {
                await expire(current)
                throw CallRules.conflict(command, state: .missed, callID: callID)
            }
            throw CallRules.conflict(command, state: current.state, callID: callID)
        }
        var logger = self.logger
        logger[metadataKey: "call.id"] = .string(callID)
        logger[metadataKey: "account.id"] = .string(accountID)
        logger.info("call \(changed.state.rawValue)", metadata: ["call.command": .string(command.rawValue)])
        record(changed)
        await cluster.publish(CallRules.events(after: changed, actingDevice: actor.deviceID), call: changed)
        await notifier.callEnded(changed)
        return changed
    }

    /// Ends a ring whose time is up: `call.missed` to the callee, `call.ended` to the caller (in a
    /// ring group that someone answered, `call.missed` to the identities still ringing, and the
    /// call goes on). Harmless when the call has moved on already.
    func expire(_ call: Call) async {
        do {
            if call.group != nil {
                _ = try await updateGroup(call) { GroupCallRules.timeout($0, at: self.clock.now) }
                return
            }
            guard let missed = try await store.transitionCall(CallRules.timeout(call, at: clock.now)) else { return }
            await announceTimeout(missed)
        } catch {
            logger.warning("could not end an unanswered call", metadata: ["call.id": .string(call.id), "error.cause": .string("\(error)")])
        }
    }

    /// Ends every ring whose time is up. Returns how many were found due (at most `limit` of
    /// each kind): when that is `limit`, more may be.
    ///
    /// Calls to one identity end together in the store (``CallStore/endUnansweredCalls(at:limit:)``)
    /// and are told in one go; ring groups each apply their own change.
    @discardableResult
    func expireDue(limit: Int = 500) async throws -> Int {
        let now = clock.now
        let ended = try await store.endUnansweredCalls(at: now, limit: limit)
        await announceTimeouts(ended)
        // What is due still: ring groups, and calls another instance's sweep is ending right now.
        let groups = try await store.expiredRingingCalls(before: now, limit: limit).filter { $0.group != nil }
        for call in groups { await expire(call) }
        return max(ended.count, groups.count)
    }

    /// Tells everyone calls to one identity were not answered in time, their events in as few
    /// notices to the other instances as fit.
    private func announceTimeouts(_ ended: [Call]) async {
        guard !ended.isEmpty else { return }
        for missed in ended { record(missed) }
        await cluster.publish(ended.map { (CallRules.events(after: $0, actingDevice: nil), $0) })
        for missed in ended { await notifier.callEnded(missed) }
    }

    /// Tells everyone a call to one identity was not answered in time.
    private func announceTimeout(_ missed: Call) async {
        record(missed)
        await cluster.publish(CallRules.events(after: missed, actingDevice: nil), call: missed)
        await notifier.callEnded(missed)
    }

    /// Applies a ring group's change, computed by `rule` from `call` as stored: when another change
    /// got in first, it is computed again from the call that change left (the rule may now throw
    /// the 409, or return `nil` for "nothing to do"). Then sends its events and missed-call notices.
    ///
    /// Every retry means another change was applied, and a call has a bounded number of them
    /// (each identity rings, answers and leaves once), so the loop ends.
    @discardableResult
    private func updateGroup(_ call: Call, _ rule: @Sendable (Call) throws -> GroupCallChange?) async throws -> GroupCallChange? {
        var current = call
        for _ in 0..<(RingGroup.maxMembers * 4 + 4) {
            guard var change = try rule(current) else { return nil }
            if let stored = try await store.updateCall(change.call, expectedVersion: current.version) {
                change.call = stored
                if stored.state != current.state { record(stored) }
                await cluster.publish(change.events, call: stored)
                await notifier.ringEnded(for: change.unanswered, of: stored)
                return change
            }
            guard let latest = try await store.call(id: call.id, accountID: call.accountID) else {
                throw RingRelayError.notFound("call", id: call.id)
            }
            current = latest
        }
        throw RingRelayError(
            .conflict, code: .callNotRinging, "Call '\(ClientText.echo(call.id))' changed too often to apply the command; try again.")
    }

    private func record(_ call: Call) {
        metrics.recordCallOutcome(call.state)
        if call.state == .accepted, let answeredAt = call.answeredAt {
            metrics.recordTimeToAnswer(answeredAt.timeIntervalSince(call.createdAt))
        }
    }

    // MARK: Validation

    private static func media(_ text: String?) throws(RingRelayError) -> CallMedia {
        guard let text else { return .audio }
        guard let media = CallMedia(rawValue: text) else { throw .invalidField("media", "must be 'audio' or 'video'.") }
        return media
    }

    /// The identities a call rings: 1 to ``RingGroup/maxMembers``, each valid, none twice, and in
    /// a ring group never the caller.
    private static func callees(_ to: [String], caller: String) throws(RingRelayError) -> [String] {
        guard (1...RingGroup.maxMembers).contains(to.count) else {
            throw .invalidField("to", "must name 1 to \(RingGroup.maxMembers) identities; it names \(to.count).")
        }
        guard to.count > 1 else {
            try BindingRules.validateIdentity(to[0], field: "to")
            return to
        }
        var named: Set<String> = []
        for (index, identity) in to.enumerated() {
            try BindingRules.validateIdentity(identity, field: "to[\(index)]")
            guard named.insert(identity).inserted else { throw .invalidField("to[\(index)]", "names '\(ClientText.echo(identity))' twice.") }
            guard identity != caller else { throw .invalidField("to[\(index)]", "is the caller; a ring group rings others.") }
        }
        return to
    }

    private static func ringMode(_ text: String) throws(RingRelayError) -> RingMode {
        guard let mode = RingMode(rawValue: text) else { throw .invalidField("mode", "must be 'first' or 'all'.") }
        return mode
    }

    static func busyPolicy(_ text: String) throws(RingRelayError) -> BusyPolicy {
        guard let policy = BusyPolicy(rawValue: text) else { throw .invalidField("ifBusy", "must be 'ring' or 'reject'.") }
        return policy
    }

    private static func metadata(_ value: JSONValue?) throws(RingRelayError) -> String? {
        guard let value else { return nil }
        guard value.objectValue != nil else { throw .invalidField("metadata", "must be a JSON object.") }
        let encoded = value.jsonText
        guard encoded.utf8.count <= maxMetadataBytes else {
            throw .invalidField("metadata", "must be at most \(maxMetadataBytes) bytes as JSON; it is \(encoded.utf8.count).")
        }
        return encoded
    }

    /// Checks the caller's picture by ``AvatarURLRules``. A sealed call refuses it: its invites
    /// must not describe the caller in clear, and the app can put the picture inside the box.
    private static func validateAvatarURL(_ text: String, sealed: Bool) throws(RingRelayError) {
        guard !sealed else {
            throw .invalidField("avatarUrl", "must not be given with 'sealed': the server relays it in clear; put it inside the sealed invites.")
        }
        if let problem = AvatarURLRules.problem(with: text) { throw .invalidField("avatarUrl", problem) }
    }

    /// Each box must name an active binding of a callee that has a public key (the key the box is
    /// sealed to): a box for anyone else's binding, or one that does not exist, is refused by its
    /// position (nothing rings). Returns the boxed bindings with their boxes, in request order.
    private static func sealedBindings(
        _ invites: [SealedInvite], callees: [String], accountID: String, store: any DataStore
    ) async throws -> [(binding: Binding, box: String)] {
        var calleeBindings: [String: Binding] = [:]
        for callee in callees {
            for binding in try await store.activeBindings(accountID: accountID, identity: callee) { calleeBindings[binding.id] = binding }
        }
        return try invites.enumerated().map { index, invite in
            guard let binding = calleeBindings[invite.bindingId] else {
                let whose = callees.count == 1 ? "'\(ClientText.echo(callees[0]))'" : "any identity called"
                throw RingRelayError.invalidField("sealed[\(index)].bindingId", "is not an active binding of \(whose).")
            }
            guard binding.publicKey != nil else {
                throw RingRelayError.invalidField(
                    "sealed[\(index)].bindingId", "names a binding without a publicKey; a box is sealed to its binding's key.")
            }
            return (binding, invite.box)
        }
    }

    /// Checks sealed invites' shapes: at most ``maxSealedInvites``, binding ids, base64 boxes within
    /// the size limit, no binding named twice.
    private static func validateSealed(_ invites: [SealedInvite]) throws(RingRelayError) {
        guard invites.count <= maxSealedInvites else {
            throw .invalidField("sealed", "must hold at most \(maxSealedInvites) invites; it holds \(invites.count).")
        }
        var named: Set<String> = []
        for (index, invite) in invites.enumerated() {
            guard invite.bindingId.hasPrefix("\(ResourceID.binding)_") else {
                throw .invalidField("sealed[\(index)].bindingId", "must be the id of one of the callee's bindings (bnd_…).")
            }
            guard (1...maxSealedBoxLength).contains(invite.box.count) else {
                throw .invalidField("sealed[\(index)].box", "must be 1 to \(maxSealedBoxLength) characters; this one has \(invite.box.count).")
            }
            guard Data(base64Encoded: invite.box) != nil else { throw .invalidField("sealed[\(index)].box", "must be base64.") }
            guard named.insert(invite.bindingId).inserted else {
                throw .invalidField("sealed[\(index)].bindingId", "names a binding twice.")
            }
        }
    }
}

