// Stub of UserNotifications for scripts/typecheck-apple-sources: only what RingRelayKit uses,
// with the declarations of Apple's documentation.
import Foundation

private func unavailable() -> Never { fatalError("UserNotifications stub: for type-checking only") }

/// `class UNNotificationContent : NSObject, NSCopying, NSMutableCopying, NSSecureCoding`
open class UNNotificationContent: NSObject {
    /// `init()`: empty content, which a service extension with the filtering entitlement delivers to show nothing.
    public override init() {}
    /// `var userInfo: [AnyHashable : Any] { get }`
    open var userInfo: [AnyHashable: Any] { unavailable() }
}

/// `class UNNotificationRequest : NSObject, NSCopying, NSSecureCoding`
open class UNNotificationRequest: NSObject {
    /// `var identifier: String { get }`
    open var identifier: String { unavailable() }
    /// `@NSCopying var content: UNNotificationContent { get }`
    open var content: UNNotificationContent { unavailable() }
}
