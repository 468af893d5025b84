import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import RingRelayCore
import RingRelayWire

/// `GET /v1/connect`: a device's live connection.
///
/// The upgrade is refused (with the usual error body) unless a device access token came with the
/// request, in the `Authorization` header or as `?access_token=`. Once open, the server sends
/// `ready`, replays what the device has not acknowledged, then call events; the device sends acks,
/// call commands and pings. A bad frame gets an `error` frame and the connection stays open.
struct ConnectController {
    let hub: LiveHub
    /// Told where each device is connected, for rings from other instances.
    let cluster: ClusterSync
    let calls: CallService
    let metrics: ServerMetrics
    let clock: any WallClock
    /// How long a connection may be quiet before it is pinged (and, twice that, dropped).
    let pingInterval: Duration
    /// What a connection may have waiting to be written.
    let outboundBudget: LiveOutboundLimits

    /// Largest frame a device may send.
    static let maxFrameBytes = 16 * 1024

    func register(on router: Router<RingRelayRequestContext>) {
        router.ws("/v1/connect") { request, context in
            guard case .device = context.principal else {
                if context.principal == nil { throw RingRelayRequestContext.missingCredentials }
                throw RingRelayError.forbidden("The live connection needs a device access token (POST /v1/access-tokens).")
            }
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                throw RingRelayError(.badRequest, code: .webSocketRequired, "GET /v1/connect opens a WebSocket; connect with a WebSocket client.")
            }
            if let last = request.uri.queryParameters["lastEventId"], !last.hasPrefix("\(ResourceID.event)_") {
                throw RingRelayError.invalidField("lastEventId", "must be an event id (evt_…) from this connection's events.")
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            context.requestContext.releaseWebSocketHandler()
            guard case .device(let accountID, let identity, let deviceID) = context.requestContext.principal else { return }
            let key = DeviceKey(accountID: accountID, identity: identity, deviceID: deviceID)
            let channel = context.requestContext.channel
            try await attachHandlers(to: channel, for: key)
            try await serve(
                key, lastEventID: context.request.uri.queryParameters["lastEventId"].map(String.init),
                expiresAt: context.requestContext.credentialExpiresAt, channel: channel, inbound: inbound, outbound: outbound)
        }
    }

    /// Puts the outbound budget behind the frame encoder (so it sees every frame written), and the
    /// keep-alive and the ack handler behind the frame decoder (so they see whole frames) and the
    /// encoder (so their writes are framed).
    private func attachHandlers(to channel: any Channel, for key: DeviceKey) async throws {
        let interval = TimeAmount.nanoseconds(pingInterval.nanoseconds)
        let hub = hub
        let limits = outboundBudget
        try await channel.eventLoop.submit {
            let pipeline = channel.pipeline.syncOperations
            let encoder = try pipeline.handler(type: WebSocketFrameEncoder.self)
            try pipeline.addHandler(LiveOutboundBudget(limits: limits), position: .after(encoder))
            let decoder = try pipeline.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
            let keepAlive = LiveKeepAliveHandler(interval: interval)
            try pipeline.addHandler(keepAlive, position: .after(decoder))
            try pipeline.addHandler(LiveAckHandler(hub: hub, key: key), position: .after(keepAlive))
        }.get()
    }

    private func serve(
        _ key: DeviceKey, lastEventID: String?, expiresAt: Date?, channel: any Channel, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter
    ) async throws {
        // Frames go straight to the channel, in the order the hub hands them over; only a close
        // (rare: the device connected again) goes through the WebSocket library's close handshake.
        let (closes, closer) = AsyncStream.makeStream(of: (code: UInt16, reason: String).self)
        let sink = LiveHub.Sink(
            send: { text in
                // Always queued on the loop, even from it, so frames keep the hub's order.
                channel.eventLoop.execute {
                    channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(string: text)), promise: nil)
                }
            },
            close: { code, reason in
                guard code == LiveCloseCode.goingAway.rawValue else {
                    closer.yield((code, reason))
                    closer.finish()
                    return
                }
                // Shutting down: the close frame goes out now, ahead of anything the server's own
                // shutdown does to the connection (the WebSocket library closes with 1000 then);
                // --shutdown-grace bounds the wait for a device that never answers it.
                channel.eventLoop.execute {
                    channel.writeAndFlush(
                        WebSocketFrame.close(code: WebSocketErrorCode(codeNumber: Int(code)), reason: reason, allocator: channel.allocator),
                        promise: nil)
                }
            })
        let registration = hub.connect(key, lastEventID: lastEventID, sink: sink)
        // The hub forgets the device as soon as its connection closes, not when this task next
        // runs: a loaded machine can take a while for that, and a call created in between would
        // plan a live ring to a device that is gone (the defer below does it again, harmlessly).
        channel.closeFuture.whenComplete { [hub] _ in hub.disconnect(registration) }
        metrics.recordLiveConnections(hub.connectionCount)
        await cluster.deviceConnected(registration, lastEventID: lastEventID)
        // The token was checked at the upgrade only: the connection ends when the token does
        // (4002), and the device comes back with a fresh one.
        let expiry = expiresAt.map { expiresAt in
            let remaining = max(0, expiresAt.timeIntervalSince(clock.now))
            return channel.eventLoop.scheduleTask(in: TimeAmount(Duration.seconds(remaining))) { [hub] in
                hub.closeExpired(registration)
            }
        }
        defer {
            expiry?.cancel()
            closer.finish()
            hub.disconnect(registration)
            metrics.recordLiveConnections(hub.connectionCount)
        }
        // On shutdown the hub closes every connection with 1001 first (ShutdownNotice); this
        // returns when the device or the server ends the connection.
        do {
            try await serveFrames(registration, closes: closes, inbound: inbound, outbound: outbound)
        } catch {
            await cluster.deviceDisconnected(registration)
            throw error
        }
        await cluster.deviceDisconnected(registration)
    }

    private func serveFrames(
        _ registration: LiveHub.Registration, closes: AsyncStream<(code: UInt16, reason: String)>, inbound: WebSocketInboundStream,
        outbound: WebSocketOutboundWriter
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await close in closes {
                    try await outbound.close(.unknown(close.code), reason: close.reason)
                }
            }
            // The device's frames other than acks (which LiveAckHandler takes), one at a time.
            group.addTask {
                for try await message in inbound.messages(maxSize: Self.maxFrameBytes) {
                    guard case .text(let text) = message else {
                        hub.reply(.error(.init(code: RingRelayError.Code.textFramesOnly.rawValue, message: "Send JSON text frames."), callId: nil), to: registration)
                        continue
                    }
                    await handle(text, from: registration)
                }
            }
            // Either side ending ends the connection.
            try await group.next()
            group.cancelAll()
        }
    }

    private func handle(_ text: String, from registration: LiveHub.Registration) async {
        let frame: DeviceFrame
        do {
            if let parsed = DeviceFrame(fastParsing: text.utf8) {
                frame = parsed
            } else {
                // The fast path reads only strict JSON; JSONDecoder alone takes trailing commas
                // and repeated keys (the last one winning), so frames get the check bodies get.
                let bytes = Data(text.utf8)
                try StrictJSON.validate(bytes)
                frame = try JSONDecoder.ringRelay.decode(DeviceFrame.self, from: bytes)
            }
        } catch let error as JSONSyntaxError {
            let detail = ErrorBody.Detail(code: RingRelayError.Code.malformedJSON.rawValue, message: "The frame is not valid JSON: \(error).")
            hub.reply(.error(detail, callId: nil), to: registration)
            return
        } catch let error as DeviceFrameError {
            hub.reply(.error(.init(code: error.code, message: error.message), callId: nil), to: registration)
            return
        } catch let error as UnknownFieldError {
            hub.reply(.error(.init(code: RingRelayError.Code.unknownField.rawValue, message: "The field '\(ClientText.echo(error.field))' is not part of this frame."), callId: nil), to: registration)
            return
        } catch {
            hub.reply(
                .error(.init(code: RingRelayError.Code.malformedFrame.rawValue, message: "A frame is one JSON object with a 'type'; see GET /v1/connect in GET /openapi.yaml."), callId: nil),
                to: registration)
            return
        }
        let command: CallCommand
        let callID: String
        switch frame {
        case .ping:
            hub.reply(.pong, to: registration)
            return
        case .ack(let eventID):
            hub.ack(eventID, from: registration.key)
            return
        case .accept(let id): (command, callID) = (.accept, id)
        case .reject(let id): (command, callID) = (.reject, id)
        case .cancel(let id): (command, callID) = (.cancel, id)
        case .end(let id): (command, callID) = (.end, id)
        }
        // Never echo what is not a call id: it can be 16 KB of anything.
        guard ResourceID.isValid(callID, prefix: ResourceID.call) else {
            hub.reply(.error(.init(code: "call_not_found", message: "'callId' is not a call id (call_…)."), callId: nil), to: registration)
            return
        }
        do {
            let actor = CallActor(identity: registration.key.identity, deviceID: registration.key.deviceID)
            _ = try await calls.apply(command, callID: callID, accountID: registration.key.accountID, actor: actor)
        } catch {
            let mapped = ErrorMiddleware.map(error)
            hub.reply(.error(.init(code: mapped.code, message: mapped.message, state: mapped.state), callId: callID), to: registration)
        }
    }
}
