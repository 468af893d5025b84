// Stub of PushKit for scripts/typecheck-apple-sources: only what RingRelayKit uses, with the
// declarations of Apple's documentation.
import Foundation

private func unavailable() -> Never { fatalError("PushKit stub: for type-checking only") }

/// `struct PKPushType : Hashable, Equatable, RawRepresentable, @unchecked Sendable`
public struct PKPushType: Hashable, Equatable, RawRepresentable, @unchecked Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `static let voIP: PKPushType`
    public static let voIP = PKPushType(rawValue: "PKPushTypeVoIP")
}

/// `class PKPushCredentials : NSObject`
open class PKPushCredentials: NSObject {
    /// `var token: Data { get }`
    open var token: Data { unavailable() }
    /// `var type: PKPushType { get }`
    open var type: PKPushType { unavailable() }
}

/// `class PKPushPayload : NSObject`
open class PKPushPayload: NSObject {
    /// `var dictionaryPayload: [AnyHashable : Any] { get }`
    open var dictionaryPayload: [AnyHashable: Any] { unavailable() }
    /// `var type: PKPushType { get }`
    open var type: PKPushType { unavailable() }
}

/// `protocol PKPushRegistryDelegate : NSObjectProtocol`
public protocol PKPushRegistryDelegate: NSObjectProtocol {
    /// `func pushRegistry(_ registry: PKPushRegistry, didUpdate pushCredentials: PKPushCredentials, for type: PKPushType)`
    func pushRegistry(_ registry: PKPushRegistry, didUpdate pushCredentials: PKPushCredentials, for type: PKPushType)
    /// `optional func pushRegistry(_ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType, completion: @escaping @Sendable () -> Void)`
    func pushRegistry(
        _ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType,
        completion: @escaping @Sendable () -> Void)
    /// `optional func pushRegistry(_ registry: PKPushRegistry, didInvalidatePushTokenFor type: PKPushType)`
    func pushRegistry(_ registry: PKPushRegistry, didInvalidatePushTokenFor type: PKPushType)
}

/// `class PKPushRegistry : NSObject`
open class PKPushRegistry: NSObject {
    /// `init(queue: dispatch_queue_t?)`
    public init(queue: DispatchQueue?) { unavailable() }
    /// `weak var delegate: (any PKPushRegistryDelegate)?`
    open weak var delegate: (any PKPushRegistryDelegate)?
    /// `var desiredPushTypes: Set<PKPushType>?`
    open var desiredPushTypes: Set<PKPushType>?
}
