import Foundation
import RingRelayCore

/// One FCM HTTP v1 call message, built and checked before anything is sent.
///
/// A data-only message (every value a string, so the app's messaging service runs even in the
/// background) with `android.priority: HIGH` and `android.ttl` equal to the ring time left, so
/// FCM drops a message that could only arrive after the call is over:
///
/// ```json
/// {"message":{"android":{"priority":"HIGH","ttl":"30s"},"data":{"ringrelay":"{…}"},"token":"…"}}
/// ```
public struct FCMRequest: Sendable, Hashable {
    /// The message kind, for metrics (`kind="data"`).
    public static let kind = "data"
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
    /// The JSON body, sent as is.
    public var body: [UInt8]

    /// Builds a call message that expires with the ring.
    ///
    /// - Parameters:
    ///   - token: the binding's registration token.
    ///   - data: the data payload; FCM requires string values.
    ///   - expiresAt: when the ring ends; `android.ttl` is the whole seconds left (0 when past).
    ///   - now: the current time.
    /// - Throws: ``FCMRequestError`` when the token is empty, a key is reserved, or the data is
    ///   larger than FCM accepts.
    public init(token: String, data: [String: String], expiresAt: Date, now: Date) throws(FCMRequestError) {
        let seconds = expiresAt.timeIntervalSince(now)
        let ttl = seconds.isFinite ? Int(max(0, min(seconds, Double(Self.maxTimeToLive))).rounded(.down)) : 0
        try self.init(token: token, data: data, timeToLive: ttl)
    }

    /// Builds a call message with an explicit time to live.
    ///
    /// - Parameter timeToLive: `android.ttl` in seconds, clamped to 0…2,419,200.
    /// - Throws: ``FCMRequestError`` as above.
    public init(token: String, data: [String: String], timeToLive: Int) throws(FCMRequestError) {
        guard !token.isEmpty, token.utf8.count <= 4096, !token.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F })
        else { throw .invalidToken }
        for key in data.keys.sorted() where Self.isReserved(key) { throw .reservedKey(key) }
        let size = Self.dataSize(data)
        guard size <= Self.maxDataBytes else { throw .payloadTooLarge(size: size, limit: Self.maxDataBytes) }
        self.token = token
        self.data = data
        self.timeToLive = min(max(0, timeToLive), Self.maxTimeToLive)
        self.body = Self.encode(token: token, data: data, ttl: self.timeToLive)
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
            var android: Android
        }
        struct Android: Encodable {
            var priority: String
            var ttl: String
        }
        var message: Message
    }

    private static func encode(token: String, data: [String: String], ttl: Int) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = Body(message: .init(token: token, data: data, android: .init(priority: "HIGH", ttl: "\(ttl)s")))
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
