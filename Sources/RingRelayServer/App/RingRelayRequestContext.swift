import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import RingRelayCore
import Synchronization

/// Who is calling, as established by ``AuthMiddleware``.
enum Principal: Sendable, Hashable {
    /// The operator, with the admin token.
    case admin
    /// An app backend, with an account API key.
    case account(accountID: String, keyID: String)
    /// A device, with an access token for one identity.
    case device(accountID: String, identity: String, deviceID: String)
    /// A metrics scraper, with `--metrics-token`: `/metrics` and nothing else.
    case metrics
}

/// What an account-scoped request may touch: an account, and for devices one identity within it.
struct AccountScope: Sendable, Hashable {
    /// The account.
    var accountID: String
    /// Set for device tokens: only this identity's data is visible.
    var identity: String?
    /// Set for device tokens.
    var deviceID: String?
}

/// The per-request context of every RingRelay route.
struct RingRelayRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    /// Set by ``AuthMiddleware`` when valid credentials were presented.
    var principal: Principal?
    /// When the presented credential stops being valid: a device access token's `exp`. The live
    /// connection is closed then.
    var credentialExpiresAt: Date?
    /// Where the `/v1/connect` route leaves its handler for the WebSocket upgrade.
    var webSocket: WebSocketHandlerReference<Self> { webSocketSlot.reference.withLock { $0 } }
    private let webSocketSlot = WebSocketSlot()
    /// The connection the request came on; `/v1/connect` adds its keep-alive to it.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }

    /// Lets go of the handler the `/v1/connect` route left for the upgrade; the upgrade calls
    /// this first thing.
    ///
    /// hummingbird-websocket keeps the handler in a box that also holds a copy of this context,
    /// which holds the box: a reference cycle that nothing breaks, so every upgraded connection's
    /// context, its channel and the channel's read buffers stayed in memory for good (75–160 KB
    /// per live connection that had sent data). Replacing the box here breaks the cycle: the old
    /// one goes when the library's upgrade is done with it.
    func releaseWebSocketHandler() {
        webSocketSlot.reference.withLock { $0 = WebSocketHandlerReference() }
    }

    /// Requires the admin token.
    func requireAdmin() throws(RingRelayError) {
        switch principal {
        case .admin: return
        case nil: throw Self.missingCredentials
        case .account, .device, .metrics: throw .forbidden("This endpoint needs the admin token.")
        }
    }

    /// Requires an account API key; returns its account id.
    func requireAccountKey() throws(RingRelayError) -> String {
        switch principal {
        case .account(let accountID, _): return accountID
        case nil: throw Self.missingCredentials
        case .admin: throw .forbidden("This endpoint needs an account API key, not the admin token.")
        case .device: throw .forbidden("This endpoint needs an account API key; device access tokens cannot use it.")
        case .metrics: throw .forbidden("The metrics token opens /metrics only.")
        }
    }

    /// Requires an account API key or a device access token.
    func requireScope() throws(RingRelayError) -> AccountScope {
        switch principal {
        case .account(let accountID, _): return AccountScope(accountID: accountID)
        case .device(let accountID, let identity, let deviceID):
            return AccountScope(accountID: accountID, identity: identity, deviceID: deviceID)
        case nil: throw Self.missingCredentials
        case .admin: throw .forbidden("This endpoint needs an account API key or a device access token, not the admin token.")
        case .metrics: throw .forbidden("The metrics token opens /metrics only.")
        }
    }

    static let missingCredentials = RingRelayError(
        .unauthenticated, code: .missingCredentials, "Send 'Authorization: Bearer <token>' with an admin token, an account API key or a device access token.")
}

/// The shared, replaceable home of a request's ``WebSocketHandlerReference`` (see
/// ``RingRelayRequestContext/releaseWebSocketHandler()``).
private final class WebSocketSlot: Sendable {
    let reference = Mutex(WebSocketHandlerReference<RingRelayRequestContext>())
}
