import Foundation
import RingRelayWire

/// The connection of one device to a RingRelay server: its push bindings, its live connection
/// (call events in, acknowledgements out, automatic reconnect and replay) and its calls.
///
/// ```swift
/// let client = RingRelayClient(
///     configuration: .init(serverURL: URL(string: "https://ring.example.com")!, deviceId: deviceId),
///     systemUI: callKitBridge,
///     accessToken: { try await backend.ringRelayToken() })
/// await client.connect()
/// try await client.register(pushToken: voipToken, type: .apnsVoIP, environment: .production)
/// let call = try await client.startCall(to: "bob")
/// ```
public actor RingRelayClient {
    /// How the client connects.
    public struct Configuration: Sendable {
        /// The server's base URL (`https://ring.example.com`); the live connection uses `wss` to the same host.
        public var serverURL: URL
        /// This device's id, as in its access tokens; recorded on bindings.
        public var deviceId: String?
        /// When to reconnect after the live connection drops.
        public var reconnectPolicy: ReconnectPolicy
        /// The call manager's limits, callback executor and clock.
        public var calls: CallManager.Configuration
        /// This device's key and files for sealed calls; `nil` for none (a sealed ring then ends
        /// at once as failed).
        public var sealedCalls: SealedCallConfiguration?

        /// Creates a configuration.
        public init(
            serverURL: URL, deviceId: String? = nil, reconnectPolicy: ReconnectPolicy = ReconnectPolicy(),
            calls: CallManager.Configuration = CallManager.Configuration(), sealedCalls: SealedCallConfiguration? = nil
        ) {
            self.serverURL = serverURL
            self.deviceId = deviceId
            self.reconnectPolicy = reconnectPolicy
            self.calls = calls
            self.sealedCalls = sealedCalls
        }
    }

    /// Where the live connection is.
    public enum ConnectionState: Sendable, Hashable {
        /// Not connected, and not trying (before ``connect()`` or after ``disconnect()``).
        case disconnected
        /// Opening the connection.
        case connecting
        /// Registered with the server; events flow.
        case connected(LiveReady)
        /// The connection failed or dropped; the next attempt comes after this delay.
        case waitingToReconnect(Duration)
        /// The server ended the connection for good and the client stopped trying: another
        /// connection of this device replaced it (4001), the account was deleted (4003) or the
        /// device's last binding was removed (4004). ``connect()`` starts over.
        case stopped(LiveConnectionClosed)
    }

    /// The device's calls. Pushes go to ``CallManager/handlePush(_:)-(Dictionary<AnyHashable,Any>)``.
    public nonisolated let calls: CallManager
    /// This client's configuration.
    public nonisolated let configuration: Configuration

    let api: APIClient
    private let liveTransport: (any LiveTransport)?
    private let bindingStore: any BindingStore

    private var liveTask: Task<Void, Never>?
    private var connection: (any LiveConnection)?
    private var lastEventId: String?
    private var handledEvents = RecentEventIds()
    private var state = ConnectionState.disconnected
    /// Why the live connection is not open, while it is ``ConnectionState/waitingToReconnect(_:)``:
    /// what the last attempt threw (the server unreachable, the upgrade refused, …), or the
    /// server's close. `nil` when the connection simply ended, and once connected again.
    public private(set) var connectionFailure: (any Error)?
    private var stateObservers: [Int: AsyncStream<ConnectionState>.Continuation] = [:]
    private var nextObserver = 0

    /// Creates a client.
    ///
    /// - Parameters:
    ///   - configuration: the server and the client's behaviour.
    ///   - systemUI: the system call UI (``CallKitBridge`` on iOS).
    ///   - accessToken: fetches a fresh device access token from the app's backend; called at
    ///     first use and whenever the server refuses the current token.
    ///   - http: the REST transport.
    ///   - live: the WebSocket transport; `nil` (the default off Apple platforms) means no live
    ///     connection: calls arrive by push only.
    ///   - bindingStore: where registered bindings are remembered.
    public init(
        configuration: Configuration, systemUI: any SystemCallUI, accessToken: @escaping @Sendable () async throws -> String,
        http: any HTTPTransport = URLSessionHTTPTransport(), live: (any LiveTransport)? = RingRelayClient.defaultLiveTransport,
        bindingStore: any BindingStore = InMemoryBindingStore()
    ) {
        let api = APIClient(
            baseURL: configuration.serverURL, deviceId: configuration.deviceId, http: http,
            tokens: AccessTokenCache(provider: accessToken))
        self.api = api
        self.configuration = configuration
        self.liveTransport = live
        self.bindingStore = bindingStore
        let sealedInvites = configuration.sealedCalls.map {
            ClientSealedInviteOpener(configuration: $0, api: api, bindingStore: bindingStore, now: configuration.calls.now)
        }
        self.calls = CallManager(systemUI: systemUI, signaling: api, configuration: configuration.calls, sealedInvites: sealedInvites)
    }

    /// `URLSessionLiveTransport` on Apple platforms, none elsewhere.
    public static var defaultLiveTransport: (any LiveTransport)? {
        #if canImport(Darwin)
            URLSessionLiveTransport()
        #else
            nil
        #endif
    }

    // MARK: Calls

    /// Calls `callee`: see ``CallManager/startCall(to:media:displayName:avatarURL:metadata:options:)``.
    public func startCall(
        to callee: String, media: CallMedia = .audio, displayName: String? = nil, avatarURL: URL? = nil, metadata: JSONValue? = nil,
        options: CallOptions = CallOptions()
    ) async throws(RingRelayError) -> Call {
        try await calls.startCall(
            to: callee, media: media, displayName: displayName, avatarURL: avatarURL, metadata: metadata, options: options)
    }

    /// Calls several identities at once, a ring group: see
    /// ``CallManager/startCall(to:mode:media:displayName:avatarURL:metadata:options:)``.
    ///
    /// ```swift
    /// let call = try await client.startCall(to: ["bob", "carol"], mode: .all)
    /// ```
    public func startCall(
        to callees: [String], mode: RingMode = .first, media: CallMedia = .audio, displayName: String? = nil, avatarURL: URL? = nil,
        metadata: JSONValue? = nil, options: CallOptions = CallOptions()
    ) async throws(RingRelayError) -> Call {
        try await calls.startCall(
            to: callees, mode: mode, media: media, displayName: displayName, avatarURL: avatarURL, metadata: metadata, options: options)
    }

    /// Reads a call as the server shows it.
    public func fetchCall(id: String) async throws(RingRelayError) -> CallResource {
        try await api.fetchCall(id: id)
    }

    /// The device keys of `identity` (of this account) that a sealed invite is sealed to: its
    /// active bindings with a public key, by registration time (`GET /v1/identities/{identity}/keys`).
    ///
    /// - Throws: the server's 404 `identity_not_found` (``ServerError/Code/identityNotFound``) when
    ///   `identity` has no active binding in the account; an identity with bindings but no key
    ///   has none to return.
    public func deviceKeys(of identity: String) async throws(RingRelayError) -> [DeviceKeyResource] {
        try await api.deviceKeys(of: identity).data
    }

    /// This identity's call history, newest first, one page at a time: the calls it placed and
    /// the calls that rang it, on any of its devices, with who answered (`answeredBy`, a device
    /// id), how each ended (`state`, `endReason`, `endedBy`) and how long it lasted
    /// (`durationSeconds`); a ring group's mode and participants are ``CallResource/ringMode`` and
    /// ``CallResource/ringGroup``. Deliveries are left out; ``fetchCall(id:)`` has them. With `states`, a
    /// page can be short, even empty, while `nextCursor` is set: the server looks at a bounded
    /// number of calls per page.
    ///
    /// ```swift
    /// var page = try await client.recentCalls(direction: .incoming, states: [.missed])
    /// var missed = page.data
    /// while missed.count < 20, let cursor = page.nextCursor {
    ///     page = try await client.recentCalls(cursor: cursor, direction: .incoming, states: [.missed])
    ///     missed += page.data
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - limit: page size, 1–100 (the server's default is 50).
    ///   - cursor: `nextCursor` of the previous page, with the same filters.
    ///   - direction: only calls this identity received, or only those it placed.
    ///   - states: only calls in one of these states; empty for all.
    ///   - since: only calls created at or after this time.
    ///   - until: only calls created before this time.
    /// - Throws: ``RingRelayError/server(_:)`` with 422 for a value out of range or a cursor the
    ///   server did not issue.
    public func recentCalls(
        limit: Int? = nil, cursor: String? = nil, direction: CallDirection? = nil, states: Set<CallRecordState> = [],
        since: Date? = nil, until: Date? = nil
    ) async throws(RingRelayError) -> CallList {
        try await api.recentCalls(
            CallHistoryQuery(limit: limit, cursor: cursor, direction: direction, states: states, since: since, until: until))
    }

    // MARK: Bindings

    /// Registers a push token for this device, replacing the binding of an older token of the
    /// same type. Call it whenever the system hands over a token (every launch, and on change).
    ///
    /// - Parameters:
    ///   - pushToken: the token, as the system gives it (`PKPushCredentials.token`, the APNs device token).
    ///   - type: which kind of token.
    ///   - environment: the APNs environment (ignored for FCM and live bindings).
    ///   - publicKey: for sealed calls, on a binding of any type: the base64 X9.63 P-256 key that
    ///     invites to this binding are sealed to (``SealedCallIdentity/publicKeyBase64``).
    @discardableResult
    public func register(
        pushToken: Data, type: BindingType, environment: PushEnvironment = .production, publicKey: String? = nil
    ) async throws(RingRelayError) -> RegisteredBinding {
        try await register(token: pushToken.hexToken, type: type, environment: environment, publicKey: publicKey)
    }

    /// Registers a push token given as text (an FCM registration token, an APNs token in hex, or
    /// a `live` binding's own id).
    @discardableResult
    public func register(
        token: String, type: BindingType, environment: PushEnvironment = .production, publicKey: String? = nil
    ) async throws(RingRelayError) -> RegisteredBinding {
        let request = BindingRequest(
            identity: nil, type: type.rawValue, token: token, environment: type == .apnsVoIP || type == .apnsAlert ? environment.rawValue : nil,
            deviceId: configuration.deviceId, publicKey: publicKey)
        let resource = try await api.createBinding(request)
        let registered = RegisteredBinding(id: resource.id, type: type, token: resource.token)
        var bindings = await bindingStore.load()
        let replaced = bindings.filter { $0.type == type && $0.id != registered.id }
        bindings.removeAll { $0.type == type }
        bindings.append(registered)
        await bindingStore.save(bindings)
        for old in replaced {
            try await deleteBinding(id: old.id)
        }
        return registered
    }

    /// Removes this device's binding of `type` (at logout, or when the system invalidates the token).
    public func unregister(type: BindingType) async throws(RingRelayError) {
        var bindings = await bindingStore.load()
        let removed = bindings.filter { $0.type == type }
        bindings.removeAll { $0.type == type }
        for binding in removed {
            try await deleteBinding(id: binding.id)
        }
        await bindingStore.save(bindings)
    }

    /// Deletes a binding; one that is already gone is no error.
    private func deleteBinding(id: String) async throws(RingRelayError) {
        do {
            try await api.deleteBinding(id: id)
        } catch where error.serverError?.kind == .notFound {
            return
        }
    }

    // MARK: Live connection

    /// The current state of the live connection.
    public var connectionState: ConnectionState { state }

    /// A stream of the live connection's states, starting with the current one.
    public func connectionStates() -> AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: ConnectionState.self)
        continuation.yield(state)
        let id = nextObserver
        nextObserver += 1
        stateObservers[id] = continuation
        continuation.onTermination = { _ in Task { await self.removeObserver(id) } }
        return stream
    }

    /// Opens the live connection and keeps it open, reconnecting with back-off, until
    /// ``disconnect()``. Does nothing without a ``LiveTransport`` or when already connecting.
    public func connect() {
        guard liveTask == nil, let liveTransport else { return }
        liveTask = Task { await self.runLiveConnection(liveTransport) }
    }

    /// Closes the live connection and stops reconnecting.
    public func disconnect() async {
        liveTask?.cancel()
        liveTask = nil
        await connection?.close()
        connection = nil
        connectionFailure = nil
        setState(.disconnected)
    }

    private func runLiveConnection(_ transport: any LiveTransport) async {
        var attempt = 0
        while !Task.isCancelled {
            setState(.connecting)
            var becameReady = false
            var usedToken: String?
            var closedByServer: LiveConnectionClosed?
            do {
                let token = try await api.tokens.current()
                usedToken = token
                let opened = try await transport.connect(to: liveURL(), headers: ["Authorization": "Bearer \(token)"])
                connection = opened
                if Task.isCancelled { break }
                try await receive(on: opened) {
                    becameReady = true
                    attempt = 0
                    connectionFailure = nil
                }
                connectionFailure = nil
            } catch let closed as LiveConnectionClosed {
                closedByServer = closed
                connectionFailure = closed
            } catch {
                // Dropped or refused; retried below.
                connectionFailure = error
            }
            connection = nil
            if Task.isCancelled { break }
            let delay: Duration
            switch closedByServer?.closeCode {
            case let code? where !code.allowsReconnect:
                // Replaced, account deleted, signed out: trying again would only be refused (or
                // take the connection back from this device's newer one).
                liveTask = nil
                setState(.stopped(closedByServer ?? LiveConnectionClosed(code: code.rawValue, reason: code.reason)))
                return
            case .tokenExpired?:
                // The server ends the connection when the token does: a fresh one, at once; the
                // events in between are replayed (lastEventId).
                if let usedToken { await api.tokens.invalidate(usedToken) }
                delay = .zero
            case .goingAway?:
                // The server is restarting or another instance takes over: come back soon, spread
                // over the first back-off step so every device does not return in the same instant.
                delay = configuration.reconnectPolicy.delay(forAttempt: 1, unitRandom: Double.random(in: 0..<1))
            default:
                if !becameReady, let usedToken {
                    // Refused before the server registered it: an expired token is the likely cause.
                    await api.tokens.invalidate(usedToken)
                }
                attempt += 1
                delay = configuration.reconnectPolicy.delay(forAttempt: attempt, unitRandom: Double.random(in: 0..<1))
            }
            setState(.waitingToReconnect(delay))
            if delay > .zero { try? await Task.sleep(for: delay) }
        }
    }

    /// Reads frames until the connection closes: hands each new event to the call manager,
    /// acknowledges every event (repeats too), remembers the last one for the next connect.
    private func receive(on connection: any LiveConnection, onReady: () -> Void) async throws {
        for try await text in connection.messages {
            guard let frame = try? JSONDecoder.ringRelay.decode(ServerFrame.self, from: Data(text.utf8)) else { continue }
            switch frame {
            case .ready(let ready):
                onReady()
                setState(.connected(ready))
            case .event(let event):
                if handledEvents.insert(event.eventId) {
                    calls.handle(event)
                    lastEventId = event.eventId
                }
                try await connection.send(Self.text(of: .ack(eventId: event.eventId)))
            case .pong, .error:
                // Commands go over REST, whose answers carry their errors; nothing to do here.
                break
            }
        }
    }

    /// `ws(s)://host/v1/connect[?lastEventId=…]`.
    private func liveURL() -> URL {
        var url = configuration.serverURL
        url.append(path: "v1")
        url.append(path: "connect")
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false) ?? URLComponents()
        components.scheme = components.scheme == "http" ? "ws" : components.scheme == "https" ? "wss" : components.scheme
        if let lastEventId {
            components.queryItems = [URLQueryItem(name: "lastEventId", value: lastEventId)]
        }
        return components.url ?? url
    }

    private static func text(of frame: DeviceFrame) -> String {
        // Encoding a device frame cannot fail: it holds strings only.
        String(decoding: (try? JSONEncoder.ringRelay.encode(frame)) ?? Data(), as: UTF8.self)
    }

    private func setState(_ new: ConnectionState) {
        guard new != state else { return }
        state = new
        for observer in stateObservers.values { observer.yield(new) }
    }

    private func removeObserver(_ id: Int) {
        stateObservers[id] = nil
    }
}
