import Foundation
import RingRelayWire

/// A call command a device sends to the server.
public enum CallCommand: String, Sendable, Hashable, CaseIterable {
    /// Accept a ringing call (callee).
    case accept
    /// Decline a ringing call (callee).
    case reject
    /// Give up a ringing call (caller).
    case cancel
    /// Hang up an accepted call (either side).
    case end
}

/// The server side of calls, as the ``CallManager`` needs it. ``RingRelayClient`` provides it;
/// a manager without one handles pushes and the system UI locally.
public protocol CallSignaling: Sendable {
    /// This device's id, to recognise its own answer in a call's `answeredBy`.
    var deviceId: String? { get }

    /// Starts a call from this device's identity (`POST /v1/calls`): to one identity, or to a
    /// ring group of several, rung at once as `mode` says.
    func createCall(
        to callees: [String], mode: RingMode, media: CallMedia, displayName: String?, avatarURL: URL?, metadata: JSONValue?,
        options: CallOptions
    ) async throws(RingRelayError) -> CallResource

    /// Reads a call (`GET /v1/calls/{id}`).
    func fetchCall(id: String) async throws(RingRelayError) -> CallResource

    /// Sends a command for a call (`POST /v1/calls/{id}/{command}`); returns the call after it.
    func send(_ command: CallCommand, callId: String) async throws(RingRelayError) -> CallResource
}
