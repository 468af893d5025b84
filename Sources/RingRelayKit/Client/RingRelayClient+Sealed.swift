import Crypto
import Foundation
import RingRelayWire

extension RingRelayClient {
    /// The server's key directory, for authenticating the callers of sealed invites
    /// (``SealedInviteOpener/senderKeys``).
    public nonisolated var keyDirectory: KeyDirectoryLookup {
        KeyDirectoryLookup(api: api)
    }

    /// Calls `callee`, sealed when `sealed` is `true`: the caller's name, picture, media and
    /// metadata go only inside one end-to-end encrypted box per callee device key, and the server
    /// learns who calls whom, from which device, and when.
    ///
    /// A sealed call fetches the callee's keys from the key directory, compares them with the
    /// ones sealed to before (``SealedCallConfiguration/onDeviceKeysChanged`` hears of a change),
    /// seals an invite to each and places the call with the boxes.
    ///
    /// ```swift
    /// let call = try await client.startCall(to: "bob", sealed: true, displayName: "Alice")
    /// ```
    ///
    /// - Throws: ``RingRelayError/sealedCall(_:)`` without ``Configuration/sealedCalls``, when the
    ///   callee has no device key, or when an invite is too large; or the server's error (404
    ///   `identity_not_found` for a callee with no binding in the account).
    public func startCall(
        to callee: String, sealed: Bool, media: CallMedia = .audio, displayName: String? = nil, avatarURL: URL? = nil,
        metadata: JSONValue? = nil, options: CallOptions = CallOptions()
    ) async throws(RingRelayError) -> Call {
        guard sealed else {
            return try await startCall(
                to: callee, media: media, displayName: displayName, avatarURL: avatarURL, metadata: metadata, options: options)
        }
        guard let sealedCalls = configuration.sealedCalls else {
            throw .sealedCall("Sealed calls need Configuration.sealedCalls: this device's key and account.")
        }
        let keys = try await api.deviceKeys(of: callee).data
        do {
            if let change = try sealedCalls.knownKeys.record(keys, of: callee) { sealedCalls.onDeviceKeysChanged(change) }
        } catch {
            throw .sealedCall("The known device keys could not be read or written: \(error)")
        }
        let identity = sealedCalls.identity
        // The call's id is chosen here, so that each box can name its call: a callee's SDK
        // refuses a box that arrives with another call.
        let callId = CallIDs.make()
        let lifetime = min(sealedCalls.inviteLifetime, SealedInviteOpener.maximumLifetime)
        let payload = SealedCallPayload(
            inviteId: UUID().uuidString.lowercased(), callId: callId,
            caller: .init(
                identity: identity.identity, deviceId: identity.deviceId, keyId: identity.keyId, displayName: displayName,
                avatarUrl: avatarURL?.absoluteString),
            media: media.rawValue, metadata: metadata, expiresAt: configuration.calls.now().addingTimeInterval(lifetime.seconds))
        let boxes = try Self.seal(payload, by: identity, to: keys, of: callee)
        let api = api
        return try await calls.placeCall { () async throws(RingRelayError) in
            // Media stays in the boxes too: the server's record says audio.
            try await api.createCall(
                CreateCallRequest(
                    callId: callId, to: callee, sealed: boxes, ifBusy: options.ifBusy?.rawValue, notifyMissed: options.notifyMissed))
        } describedAs: { resource in
            Call.Info(placed: resource, media: media, metadata: metadata)
        }
    }

    /// One box per key of the callee's that is a valid P-256 key.
    private static func seal(
        _ payload: SealedCallPayload, by identity: SealedCallIdentity, to keys: [DeviceKeyResource], of callee: String
    ) throws(RingRelayError) -> [SealedInvite] {
        var boxes: [SealedInvite] = []
        for key in keys {
            guard let publicKey = P256.KeyAgreement.PublicKey(base64X963: key.publicKey) else { continue }
            let address = SealedInviteAddress(accountId: identity.accountId, identity: callee, bindingId: key.bindingId)
            let box: String
            do {
                box = try identity.seal(payload, to: publicKey, address: address)
            } catch {
                throw .sealedCall("The invite for \(key.bindingId) could not be sealed: \(error)")
            }
            guard box.utf8.count <= SealedInviteOpener.maximumBoxLength else {
                throw .sealedCall(
                    "The sealed invite is \(box.utf8.count) characters, over the \(SealedInviteOpener.maximumBoxLength) a box may have: send less metadata."
                )
            }
            boxes.append(SealedInvite(bindingId: key.bindingId, box: box))
        }
        guard !boxes.isEmpty else { throw .sealedCall("'\(callee)' has no device key to seal an invite to.") }
        return boxes
    }
}

/// The opener a ``RingRelayClient`` hands its ``CallManager``: this device's current bindings,
/// the server's key directory.
struct ClientSealedInviteOpener: SealedInviteOpening {
    let configuration: SealedCallConfiguration
    let api: APIClient
    let bindingStore: any BindingStore
    let now: @Sendable () -> Date

    func open(_ box: String, callId: String) async throws(SealedInviteRefusal) -> SealedCallPayload {
        let opener = SealedInviteOpener(
            identity: configuration.identity, bindingIds: Set(await bindingStore.load().map(\.id)),
            senderKeys: KeyDirectoryLookup(api: api),
            replayStore: configuration.replayStore, now: now)
        return try await opener.open(box, callId: callId)
    }
}
