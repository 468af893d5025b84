import NIOCore
import NIOPosix
import Synchronization

/// HTTP/2 connections to one endpoint, shared by every request to it, that keep to what the
/// server allows.
///
/// - **Stream limits.** A stream is opened only while its connection has room under the peer's
///   current `SETTINGS_MAX_CONCURRENT_STREAMS` (none before the peer's first SETTINGS; lowered
///   or raised whenever the peer says so). Requests beyond that wait in one FIFO queue, each until
///   its own deadline at most; nothing waits inside NIO.
/// - **More connections for volume.** When every connection is full and requests wait, another
///   connection opens, up to ``Configuration-swift.struct/maxConnections`` — but only once each
///   connection has answered and is full at a limit above one, since APNs allows one stream until
///   its first answer and would otherwise be sent a burst of connections at start.
/// - **A connection on the caller's event loop.** A request sent from an event loop goes over a
///   connection of that loop when one has room, so its stream opens and its answer arrives with
///   no hop between threads. Once a connection has answered, a request from a loop that has none
///   opens one there (it is sent over another meanwhile), up to one per loop within
///   ``Configuration-swift.struct/maxConnections``.
/// - **Exactly once.** A stream the server did not process (`REFUSED_STREAM`, above a GOAWAY's
///   last stream id, or never opened) is sent again at once on a connection with room; a
///   connection that sends GOAWAY takes no new streams and is replaced. A request that may have
///   been processed (timeout, connection lost) is never resent here: the caller decides.
///
/// ```swift
/// let pool = HTTP2ConnectionPool(endpoint: try HTTP2Endpoint(url: "https://api.push.apple.com", tls: tls))
/// let response = try await pool.send(request, timeout: .seconds(10), deadline: .now() + .seconds(30))
/// ```
public final class HTTP2ConnectionPool: Sendable {
    /// How many connections and streams.
    public struct Configuration: Sendable {
        /// Connections opened at most (APNs suggests several for volume).
        public var maxConnections = 4
        /// Streams per connection at most, even where the server allows more.
        public var maxStreamsPerConnection = 1000
        /// TCP connect timeout (TLS and the HTTP/2 preface then share the request's deadline).
        public var connectTimeout: TimeAmount = .seconds(10)
        /// A connection idle this long is PINGed; `nil` for never.
        public var keepAliveInterval: TimeAmount? = .hours(1)
        /// A connection whose open streams get no frame for this long is PINGed, and closed if
        /// no frame arrives within as long again (an idle connection's PING too); its unanswered
        /// streams then fail as ``HTTP2Failure/Kind-swift.enum/connectionLost``, to be sent again.
        /// Well inside a request timeout, so a peer or path that went silent costs seconds, not
        /// the pushes queued behind it.
        public var silenceTimeout: TimeAmount = .seconds(3)
        /// How often one request is sent again after the server refused it unprocessed.
        public var maxRefusals = 8

        /// The defaults.
        public init() {}
    }

    /// Hooks for connection metrics.
    public struct Observer: Sendable {
        /// A connection opened.
        public var connectionOpened: @Sendable () -> Void = {}
        /// A connection closed.
        public var connectionClosed: @Sendable () -> Void = {}
        /// A PING was sent (keep-alive, or asking a silent connection whether it lives).
        public var pingSent: @Sendable () -> Void = {}
        /// A connection closed itself, for the reason given: it went silent, or the peer broke
        /// the protocol so that NIO failed it.
        public var connectionRetired: @Sendable (String) -> Void = { _ in }

        /// No hooks.
        public init() {}

        /// The given hooks.
        public init(
            connectionOpened: @escaping @Sendable () -> Void, connectionClosed: @escaping @Sendable () -> Void,
            pingSent: @escaping @Sendable () -> Void, connectionRetired: @escaping @Sendable (String) -> Void = { _ in }
        ) {
            self.connectionOpened = connectionOpened
            self.connectionClosed = connectionClosed
            self.pingSent = pingSent
            self.connectionRetired = connectionRetired
        }
    }

    private struct Waiter {
        var id: UInt64
        /// The event loop the request was sent from; `nil` when not from one of the group's.
        var home: (any EventLoop)?
        var request: HTTP2Request
        var timeout: TimeAmount
        var deadline: NIODeadline
        var refusals: Int
        var promise: EventLoopPromise<HTTP2Response>
    }

    private struct Slot {
        var connection: HTTP2PoolConnection
        var active = 0
        /// The peer's stream limit (capped); 0 until its first SETTINGS.
        var limit = 0
        var ready = false
        var goingAway = false
        /// Whether a stream on it has been answered (APNs raises its limit after the first).
        var answered = false

        func isOn(_ loop: any EventLoop) -> Bool { connection.channel.eventLoop === loop }

        var hasRoom: Bool { ready && !goingAway && active < limit }
        /// Going away with no stream left: time to close it.
        var isDrained: Bool { goingAway && active == 0 }
    }

    private struct State {
        var slots: [ObjectIdentifier: Slot] = [:]
        var connecting = 0
        /// After a connection for a loop of its own failed to open: none is tried again before this.
        var homeConnectsPausedUntil = NIODeadline.uptimeNanoseconds(0)
        var waiters = CircularBuffer<Waiter>()
        var nextID: UInt64 = 0
        var shutDown = false
        /// One timer fails queued requests past their deadlines: armed at the earliest deadline
        /// known when it was armed, re-armed for the next when it fires.
        var expiry: Scheduled<Void>?
        var expiryDeadline: NIODeadline?

        /// The pool at a glance, for a failure's detail: each connection's streams and limit.
        var summary: String {
            let connections = slots.values.map { slot in
                "\(slot.active)/\(slot.limit) streams\(slot.ready ? "" : ", not ready")\(slot.goingAway ? ", going away" : "")"
            }
            return "connections: [\(connections.joined(separator: "; "))], connecting: \(connecting), queued: \(waiters.count)"
        }

        /// The connection of slot `id` if it is going away and its last stream is done: it closes then.
        func drainedConnection(_ id: ObjectIdentifier) -> HTTP2PoolConnection? {
            slots[id].flatMap { $0.isDrained ? $0.connection : nil }
        }
    }

    /// What to do once the lock is released.
    private struct Actions {
        var starts: [(Waiter, HTTP2PoolConnection)] = []
        var failures: [(Waiter, HTTP2Failure)] = []
        /// Open a connection: on this loop, or on the group's next when `nil`.
        var connect: (on: (any EventLoop)?, home: Bool)?
    }

    private let endpoint: HTTP2Endpoint
    private let configuration: Configuration
    private let observer: Observer
    private let group: any EventLoopGroup
    /// Connections opened at most for requests' own event loops: one per loop, within the cap.
    private let homeConnections: Int
    /// The event loop the caller runs on, when it is one of the group's.
    private let currentLoop: @Sendable () -> (any EventLoop)?
    private let state = Mutex(State())

    /// Creates a pool; connections open on first use.
    public convenience init(
        endpoint: HTTP2Endpoint, configuration: Configuration = .init(), observer: Observer = .init(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) {
        self.init(endpoint: endpoint, configuration: configuration, observer: observer, group: group, currentLoop: nil)
    }

    /// - Parameter currentLoop: the event loop a request is sent from; by default the calling
    ///   thread's, when it is one of the group's loops (tests name one).
    init(
        endpoint: HTTP2Endpoint, configuration: Configuration = .init(), observer: Observer = .init(), group: any EventLoopGroup,
        currentLoop: (@Sendable () -> (any EventLoop)?)?
    ) {
        self.endpoint = endpoint
        self.configuration = configuration
        self.observer = observer
        self.group = group
        var loops: [ObjectIdentifier] = []
        for loop in group.makeIterator() { loops.append(ObjectIdentifier(loop)) }
        homeConnections = min(loops.count, configuration.maxConnections)
        self.currentLoop =
            currentLoop ?? { [loops] in
                guard let loop = MultiThreadedEventLoopGroup.currentEventLoop, loops.contains(ObjectIdentifier(loop)) else { return nil }
                return loop
            }
    }

    /// Sends `request` and waits for the complete answer.
    ///
    /// - Parameters:
    ///   - timeout: how long the stream may wait for its answer once it is open.
    ///   - deadline: no stream opens after this; a request still queued then fails with ``HTTP2Failure/Kind-swift.enum/queueDeadline``.
    /// - Throws: ``HTTP2Failure``, which says whether the server may have processed the request.
    public func send(_ request: HTTP2Request, timeout: TimeAmount, deadline: NIODeadline) async throws(HTTP2Failure) -> HTTP2Response {
        let home = currentLoop()
        let promise = (home ?? group.any()).makePromise(of: HTTP2Response.self)
        let actions = state.withLock { state -> Actions in
            state.nextID &+= 1
            let waiter = Waiter(
                id: state.nextID, home: home, request: request, timeout: timeout, deadline: deadline, refusals: 0, promise: promise)
            guard !state.shutDown else { return Actions(failures: [(waiter, HTTP2Failure(.shutDown))]) }
            guard deadline > .now() else {
                return Actions(failures: [(waiter, HTTP2Failure(.queueDeadline, detail: "the deadline had passed before the request reached the pool"))])
            }
            state.waiters.append(waiter)
            let actions = dispatch(&state)
            // Dispatch takes from the front: if this request is still queued, it is the last.
            if state.waiters.last?.id == waiter.id { armExpiry(at: deadline, &state) }
            return actions
        }
        run(actions)
        do {
            return try await promise.futureResult.get()
        } catch let failure as HTTP2Failure {
            throw failure
        } catch {
            throw HTTP2Failure(.connectionLost, detail: String(describing: error))
        }
    }

    /// Fails queued requests, closes every connection and waits until they are closed; later
    /// requests fail with ``HTTP2Failure/Kind-swift.enum/shutDown``.
    public func shutdown() async {
        let (waiters, connections) = state.withLock { state in
            state.shutDown = true
            defer { state.waiters.removeAll() }
            return (Array(state.waiters), state.slots.values.map(\.connection))
        }
        for waiter in waiters { waiter.promise.fail(HTTP2Failure(.shutDown)) }
        for connection in connections {
            connection.close()
            try? await connection.channel.closeFuture.get()
        }
    }

    // MARK: Dispatching

    /// Gives queued requests the streams that are free, in order, and decides whether another
    /// connection is needed. Call with the lock held; run the result with ``run(_:)`` after.
    private func dispatch(_ state: inout State) -> Actions {
        var actions = Actions()
        var homeless: (any EventLoop)?
        while let waiter = state.waiters.first {
            guard let key = Self.connection(for: waiter, in: state.slots) else { break }
            state.waiters.removeFirst()
            if waiter.deadline < .now() {
                actions.failures.append((waiter, HTTP2Failure(.queueDeadline, cause: "the deadline passed in the queue", state: state.summary)))
                continue
            }
            state.slots[key]!.active += 1
            let slot = state.slots[key]!
            if let home = waiter.home, !slot.isOn(home) { homeless = homeless ?? home }
            actions.starts.append((waiter, slot.connection))
        }
        guard !state.shutDown, state.connecting == 0 else { return actions }
        let usable = state.slots.values.filter { !$0.goingAway }
        if !state.waiters.isEmpty {
            // Full means full at a real limit: APNs raises its limit of 1 just after the first answer,
            // and a connection still at 1 then is warming up, not a reason for another.
            let allBusy = usable.allSatisfy { $0.ready && $0.answered && !$0.hasRoom && $0.limit > 1 }
            if usable.count < configuration.maxConnections, usable.isEmpty || allBusy {
                state.connecting += 1
                actions.connect = (state.waiters.first?.home, false)
            }
        } else if let homeless, usable.count < homeConnections, usable.contains(where: \.answered),
            !usable.contains(where: { $0.isOn(homeless) }), state.homeConnectsPausedUntil < .now()
        {
            // A request went to another loop's connection: its loop gets one of its own, now that
            // an answer shows the endpoint takes this client's requests.
            state.connecting += 1
            actions.connect = (homeless, true)
        }
        return actions
    }

    /// The connection a waiter goes over: one with room on its own event loop, else the one with
    /// the most room, so load spreads over connections (and event loops); `nil` when none has room.
    private static func connection(for waiter: Waiter, in slots: [ObjectIdentifier: Slot]) -> ObjectIdentifier? {
        var best: (key: ObjectIdentifier, room: Int, home: Bool)?
        for (key, slot) in slots where slot.hasRoom {
            let room = slot.limit - slot.active
            let home = waiter.home.map(slot.isOn) ?? false
            if let current = best, current.home && !home || current.home == home && current.room >= room { continue }
            best = (key, room, home)
        }
        return best?.key
    }

    /// Queued requests fail at their deadline rather than wait for a stream that may never come.
    /// One timer serves the whole queue (a timer each would make every dispatch cancel one, and
    /// NIO finds a cancelled timer by a linear search of all of a loop's timers).
    private func armExpiry(at deadline: NIODeadline, _ state: inout State) {
        if let armed = state.expiryDeadline, armed <= deadline { return }
        state.expiry?.cancel()
        state.expiryDeadline = deadline
        state.expiry = group.any().scheduleTask(deadline: deadline) { [weak self] in self?.expireQueued() }
    }

    /// Fails every queued request past its deadline, and arms the timer for the next.
    private func expireQueued() {
        let now = NIODeadline.now()
        let (expired, summary) = state.withLock { state -> ([Waiter], String) in
            state.expiry = nil
            state.expiryDeadline = nil
            var expired: [Waiter] = []
            var next: NIODeadline?
            state.waiters.removeAll { waiter in
                if waiter.deadline <= now {
                    expired.append(waiter)
                    return true
                }
                if waiter.deadline < next ?? .distantFuture { next = waiter.deadline }
                return false
            }
            if let next { armExpiry(at: next, &state) }
            return (expired, state.summary)
        }
        for waiter in expired {
            waiter.promise.fail(HTTP2Failure(.queueDeadline, cause: "no stream was free before the deadline", state: summary))
        }
    }

    private func run(_ actions: Actions) {
        for (waiter, failure) in actions.failures { waiter.promise.fail(failure) }
        // One batch a connection: its streams open in one task of its event loop, with one flush.
        var batches: [(HTTP2PoolConnection, [HTTP2StreamStart])] = []
        for (waiter, connection) in actions.starts {
            let id = ObjectIdentifier(connection)
            let start = HTTP2StreamStart(request: waiter.request, timeout: waiter.timeout) { [weak self] outcome in
                self?.streamEnded(waiter, outcome, on: id)
            }
            if let index = batches.firstIndex(where: { $0.0 === connection }) {
                batches[index].1.append(start)
            } else {
                batches.append((connection, [start]))
            }
        }
        for (connection, starts) in batches { connection.start(starts) }
        if let connect = actions.connect { self.connect(on: connect.on ?? group.next(), home: connect.home) }
    }

    private func streamEnded(_ waiter: Waiter, _ result: HTTP2StreamResult, on id: ObjectIdentifier) {
        switch result {
        case .response(let response):
            state.withLock { $0.slots[id]?.answered = true }
            waiter.promise.succeed(response)
        case .failed(let failure):
            waiter.promise.fail(failure)
        case .refused:
            // Not processed: send it again at once, first in line, on whichever connection has room.
            var again = waiter
            again.refusals += 1
            guard again.refusals <= configuration.maxRefusals else {
                waiter.promise.fail(HTTP2Failure(.refused, detail: "refused unprocessed \(again.refusals) times"))
                return
            }
            let actions = state.withLock { state -> Actions in
                guard !state.shutDown else { return Actions(failures: [(again, HTTP2Failure(.shutDown))]) }
                state.waiters.prepend(again)
                let actions = dispatch(&state)
                if state.waiters.first?.id == again.id { armExpiry(at: again.deadline, &state) }
                return actions
            }
            run(actions)
        }
    }

    /// Streams closed: their slots are free (NIO counts them closed by now too).
    private func streamsClosed(_ count: Int, on id: ObjectIdentifier) {
        let (actions, closing) = state.withLock { state -> (Actions, HTTP2PoolConnection?) in
            state.slots[id]?.active -= count
            return (dispatch(&state), state.drainedConnection(id))
        }
        closing?.close()
        run(actions)
    }

    // MARK: Connections

    /// Opens a connection on `loop`; `home` when it is for the requests of that loop only (a
    /// failure then pauses such connections for ``homeConnectPause``).
    private func connect(on loop: any EventLoop, home: Bool) {
        let observer = self.observer
        HTTP2PoolConnection.connect(
            to: endpoint, on: loop, connectTimeout: configuration.connectTimeout,
            liveness: .init(silence: configuration.silenceTimeout, keepAlive: configuration.keepAliveInterval),
            maxStreams: configuration.maxStreamsPerConnection,
            onOpen: { [weak self] connection in
                self?.state.withLock { $0.slots[ObjectIdentifier(connection)] = Slot(connection: connection) }
            },
            onPing: observer.pingSent, onRetire: observer.connectionRetired,
            onEvent: { [weak self] id, event in self?.handle(event, on: id) },
            onStreamsClosed: { [weak self] id, count in self?.streamsClosed(count, on: id) }
        ).whenComplete { [weak self] result in
            switch result {
            case .success:
                observer.connectionOpened()
                self?.connected()
            case .failure(let error):
                self?.connectFailed(error, home: home)
            }
        }
    }

    private func connected() {
        let actions = state.withLock { state -> Actions in
            state.connecting -= 1
            return dispatch(&state)
        }
        run(actions)
    }

    /// How long no connection for a loop of its own is opened after one failed to.
    static let homeConnectPause = TimeAmount.seconds(30)

    private func connectFailed(_ error: any Error, home: Bool) {
        let failure = HTTP2Failure(.connectFailed, detail: String(describing: error))
        let (failed, actions) = state.withLock { state -> ([Waiter], Actions) in
            state.connecting -= 1
            if home { state.homeConnectsPausedUntil = .now() + Self.homeConnectPause }
            // With no connection that works, waiting would only end at each deadline: fail now.
            guard !state.slots.values.contains(where: \.ready) else { return ([], dispatch(&state)) }
            defer { state.waiters.removeAll() }
            return (Array(state.waiters), Actions())
        }
        for waiter in failed { waiter.promise.fail(failure) }
        run(actions)
    }

    private func handle(_ event: HTTP2PoolConnection.Event, on id: ObjectIdentifier) {
        let (actions, closing) = state.withLock { state -> (Actions, HTTP2PoolConnection?) in
            switch event {
            case .settings(let limit):
                if let limit { state.slots[id]?.limit = min(limit, configuration.maxStreamsPerConnection) }
                if state.slots[id]?.ready == false {
                    state.slots[id]?.ready = true
                    // No limit in the first SETTINGS means none from the peer: ours applies.
                    if limit == nil { state.slots[id]?.limit = configuration.maxStreamsPerConnection }
                }
            case .goAway:
                state.slots[id]?.goingAway = true
            case .closed:
                // A connection that never became ready was never counted as opened.
                if let slot = state.slots.removeValue(forKey: id), slot.ready { observer.connectionClosed() }
            }
            return (dispatch(&state), state.drainedConnection(id))
        }
        closing?.close()
        run(actions)
    }
}
