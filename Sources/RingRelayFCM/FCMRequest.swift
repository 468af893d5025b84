import Foundation
import RingRelayCore

/// One FCM HTTP v1 message, built and checked before anything is sent.
///
/// A ring is a data-only message (every value a string, so the app's messaging service runs even
/// in the background) with `android.priority: HIGH` and `android.ttl` equal to the ring time left,
/// so FCM drops a message that could only arrive after the call is over:
///
/// ```json
/// {"message":{"android":{"priority":"HIGH","ttl":"30s"},"data":{"ringrelay":"{…}"},"token":"…"}}
/// ```
///
/// A missed-call notice is a notification message (``Notice``): Android shows it without the app
/// running, and a later one with the same tag replaces it.
public struct FCMRequest: Sendable, Hashable {
    /// The kind of a data-only message, for metrics (`kind="data"`).
    public static let dataKind = "data"
    /// The kind of a message with a notification, for metrics (`kind="notification"`).
    public static let notificationKind = "notification"

    /// What a notification message shows, and what it replaces.
    public struct Notice: Sendable, Hashable {
        /// The title line.
        public var title: String
        /// The text under it.
        public var body: String
        /// `collapse_key` and `android.notification.tag`: a later notice with the same tag
        /// replaces this one on the device, and FCM keeps only the last for an offline device.
        public var tag: String

        /// Creates a notice.
        public init(title: String, body: String, tag: String) {
            self.title = title
            self.body = body
            self.tag = tag
        }
    }
    /// Largest data payload FCM accepts for a token message, counting keys and values in bytes.
    public static let maxDataBytes = 4096
    /// Longest `android.ttl` FCM accepts: four weeks.
    public static let maxTimeToLive = 2_419_200

    /// The registration token.
    public var token: String
    /// The data payload.
    public var data: [String: String]
    /// `android.ttl` in whole seconds.
    public var timeToLive: Int
    /// The notification shown, for a notification message.
    public var notice: Notice?
    /// The JSON body, sent as is.
    public var body: [UInt8]

    /// `data` or `notification`, for metrics.
    public var kind: String { notice == nil ? Self.dataKind : Self.notificationKind }

    /// Builds a call message that expires with the ring.
    ///
    /// - Parameters:
    ///   - token: the binding's registration token.
    ///   - data: the data payload; FCM requires string values.
    ///   - notice: a notification to show as well; `nil` for a data-only message.
    ///   - expiresAt: when the message is of no more use (a ring's end); `android.ttl` is the whole
    ///     seconds left (0 when past).
    ///   - now: the current time.
    /// - Throws: ``FCMRequestError`` when the token is empty, a key is reserved, or the data is
    ///   larger than FCM accepts.
    public init(token: String, data: [String: String], notice: Notice? = nil, expiresAt: Date, now: Date) throws(FCMRequestError) {
        let seconds = expiresAt.timeIntervalSince(now)
        let ttl = seconds.isFinite ? Int(max(0, min(seconds, Double(Self.maxTimeToLive))).rounded(.down)) : 0
        try self.init(token: token, data: data, notice: notice, timeToLive: ttl)
    }

    /// Builds a message with an explicit time to live.
    ///
    /// - Parameter timeToLive: `android.ttl` in seconds, clamped to 0…2,419,200.
    /// - Throws: ``FCMRequestError`` as above.
    public init(token: String, data: [String: String], notice: Notice? = nil, timeToLive: Int) throws(FCMRequestError) {
        guard !token.isEmpty, token.utf8.count <= 4096, !token.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
        else { throw .invalidToken }
        for key in data.keys.sorted() where Self.isReserved(key) { throw .reservedKey(key) }
        let size = Self.dataSize(data)
        guard size <= Self.maxDataBytes else { throw .payloadTooLarge(size: size, limit: Self.maxDataBytes) }
        self.token = token
        self.data = data
        self.timeToLive = min(max(0, timeToLive), Self.maxTimeToLive)
        self.notice = notice
        self.body = Self.encode(token: token, data: data, notice: notice, ttl: self.timeToLive)
    }

    /// The size FCM counts for a data payload: the UTF-8 bytes of every key and value.
    public static func dataSize(_ data: [String: String]) -> Int {
        data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    /// Whether FCM reserves a data key: `from`, `gcm`, or anything starting with `google`.
    public static func isReserved(_ key: String) -> Bool {
        key == "from" || key == "gcm" || key.hasPrefix("google")
    }

    /// `android.ttl` as a protobuf Duration string, e.g. `"30s"`.
    public var ttl: String { "\(timeToLive)s" }

    private struct Body: Encodable {
        struct Message: Encodable {
            var token: String
            var data: [String: String]
            var notification: Notification?
            var android: Android
        }
        struct Notification: Encodable {
            var title: String
            var body: String
        }
        struct Android: Encodable {
            var priority: String
            var ttl: String
            var collapse_key: String?
            var notification: AndroidNotification?
        }
        struct AndroidNotification: Encodable {
            var tag: String
        }
        var message: Message
    }

    private static func encode(token: String, data: [String: String], notice: Notice?, ttl: Int) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let android = Body.Android(
            priority: "HIGH", ttl: "\(ttl)s", collapse_key: notice?.tag, notification: notice.map { .init(tag: $0.tag) })
        let body = Body(
            message: .init(
                token: token, data: data, notification: notice.map { .init(title: $0.title, body: $0.body) }, android: android))
        // Strings and dictionaries of strings always encode.
        return Array((try? encoder.encode(body)) ?? Data())
    }
}

/// A message that cannot be sent as asked; found before anything goes to Google.
public enum FCMRequestError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The data payload is larger than FCM accepts.
    case payloadTooLarge(size: Int, limit: Int)
    /// A data key FCM reserves.
    case reservedKey(String)
    /// The registration token is empty or contains spaces or control characters.
    case invalidToken

    /// The outcome reason this corresponds to.
    public var reason: String {
        switch self {
        case .payloadTooLarge: "PayloadTooLarge"
        case .reservedKey: "ReservedDataKey"
        case .invalidToken: "InvalidRegistrationToken"
        }
    }

    public var description: String {
        switch self {
        case .payloadTooLarge(let size, let limit):
            "The data payload is \(size) bytes (keys and values); FCM accepts at most \(limit)."
        case .reservedKey(let key):
            "The data key '\(key)' is reserved by FCM ('from', 'gcm' and keys starting with 'google')."
        case .invalidToken: "The registration token is empty or contains spaces or control characters."
        }
    }
}
