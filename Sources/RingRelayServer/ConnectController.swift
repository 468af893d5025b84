import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
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
    let calls: CallService
    let metrics: ServerMetrics
    /// How long a connection may be quiet before it is pinged (and, twice that, dropped).
    let pingInterval: Duration

    /// Largest frame a device may send.
    static let maxFrameBytes = 16 * 1024

    func register(on router: Router<RingRelayRequestContext>) {
        router.ws("/v1/connect") { request, context in
            guard case .device = context.principal else {
                if context.principal == nil { throw RingRelayRequestContext.missingCredentials }
                throw RingRelayError.forbidden("The live connection needs a device access token (POST /v1/access-tokens).")
            }
            guard request.headers[.upgrade]?.lowercased() == "websocket" else {
                throw RingRelayError(.badRequest, code: "websocket_required", "GET /v1/connect opens a WebSocket; connect with a WebSocket client.")
            }
            if let last = request.uri.queryParameters["lastEventId"], !last.hasPrefix("\(ResourceID.event)_") {
                throw RingRelayError.invalidField("lastEventId", "must be an event id (evt_…) from this connection's events.")
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            guard case .device(let accountID, let identity, let deviceID) = context.requestContext.principal else { return }
            let key = DeviceKey(accountID: accountID, identity: identity, deviceID: deviceID)
            try await LiveKeepAliveHandler.install(on: context.requestContext.channel, interval: pingInterval)
            try await serve(key, lastEventID: context.request.uri.queryParameters["lastEventId"].map(String.init), inbound: inbound, outbound: outbound, logger: context.logger)
        }
    }

    private func serve(
        _ key: DeviceKey, lastEventID: String?, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, logger: Logger
    ) async throws {
        let (frames, continuation) = AsyncStream.makeStream(of: LiveHub.Outbound.self)
        let registration = hub.connect(key, lastEventID: lastEventID, outbound: continuation)
        metrics.recordLiveConnections(hub.connectionCount)
        defer {
            continuation.finish()
            hub.disconnect(registration)
            metrics.recordLiveConnections(hub.connectionCount)
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            // Writer: frames the hub queued for this connection, in order.
            group.addTask {
                for await frame in frames {
                    switch frame {
                    case .text(let text):
                        try await outbound.write(.text(text))
                    case .close(let code, let reason):
                        try await outbound.close(.unknown(code), reason: reason)
                        return
                    }
                }
            }
            // Reader: the device's frames, one at a time.
            group.addTask {
                for try await message in inbound.messages(maxSize: Self.maxFrameBytes) {
                    guard case .text(let text) = message else {
                        hub.reply(.error(.init(code: "text_frames_only", message: "Send JSON text frames."), callId: nil), to: registration)
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
            frame = try JSONDecoder.ringRelay.decode(DeviceFrame.self, from: Data(text.utf8))
        } catch let error as DeviceFrameError {
            hub.reply(.error(.init(code: error.code, message: error.message), callId: nil), to: registration)
            return
        } catch let error as UnknownFieldError {
            hub.reply(.error(.init(code: "unknown_field", message: "The field '\(error.field)' is not part of this frame."), callId: nil), to: registration)
            return
        } catch {
            hub.reply(
                .error(.init(code: "malformed_frame", message: "A frame is one JSON object with a 'type'; see DESIGN's WebSocket events."), callId: nil),
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
        do {
            let actor = CallActor(identity: registration.key.identity, deviceID: registration.key.deviceID)
            _ = try await calls.apply(command, callID: callID, accountID: registration.key.accountID, actor: actor)
        } catch {
            let mapped = ErrorMiddleware.map(error)
            hub.reply(.error(.init(code: mapped.code, message: mapped.message, state: mapped.state), callId: callID), to: registration)
        }
    }
}
