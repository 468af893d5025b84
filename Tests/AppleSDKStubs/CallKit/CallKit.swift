// Stub of CallKit for scripts/typecheck-apple-sources: only what RingRelayKit uses, with the
// declarations of Apple's documentation.
import AVFAudio
import Foundation

private func unavailable() -> Never { fatalError("CallKit stub: for type-checking only") }

/// `class CXHandle : NSObject`
open class CXHandle: NSObject {
    /// `enum CXHandle.HandleType : Int`
    public enum HandleType: Int, Sendable {
        case generic = 1
        case phoneNumber = 2
        case emailAddress = 3
    }

    /// `init(type: CXHandle.HandleType, value: String)`
    public init(type: CXHandle.HandleType, value: String) { unavailable() }
}

/// `enum CXCallEndedReason : Int`
public enum CXCallEndedReason: Int, Sendable {
    case failed = 1
    case remoteEnded = 2
    case unanswered = 3
    case answeredElsewhere = 4
    case declinedElsewhere = 5
}

/// `class CXCallUpdate : NSObject`
open class CXCallUpdate: NSObject {
    /// `var remoteHandle: CXHandle?`
    open var remoteHandle: CXHandle?
    /// `var localizedCallerName: String?`
    open var localizedCallerName: String?
    /// `var hasVideo: Bool`
    open var hasVideo: Bool = false
}

/// `class CXAction : NSObject`
open class CXAction: NSObject {
    /// `func fulfill()`
    open func fulfill() { unavailable() }
    /// `func fail()`
    open func fail() { unavailable() }
}

/// `class CXCallAction : CXAction`
open class CXCallAction: CXAction {
    /// `var callUUID: UUID { get }`
    open var callUUID: UUID { unavailable() }
}

/// `class CXAnswerCallAction : CXCallAction`
open class CXAnswerCallAction: CXCallAction {
    /// `init(call callUUID: UUID)`
    public init(call callUUID: UUID) { unavailable() }
}

/// `class CXEndCallAction : CXCallAction`
open class CXEndCallAction: CXCallAction {
    /// `init(call callUUID: UUID)`
    public init(call callUUID: UUID) { unavailable() }
}

/// `class CXStartCallAction : CXCallAction`
open class CXStartCallAction: CXCallAction {
    /// `init(call callUUID: UUID, handle: CXHandle)`
    public init(call callUUID: UUID, handle: CXHandle) { unavailable() }
    /// `var isVideo: Bool`
    open var isVideo: Bool = false
}

/// `class CXSetHeldCallAction : CXCallAction`
open class CXSetHeldCallAction: CXCallAction {
    /// `init(call callUUID: UUID, onHold: Bool)`
    public init(call callUUID: UUID, onHold: Bool) { unavailable() }
    /// `var isOnHold: Bool`
    open var isOnHold: Bool = false
}

/// `class CXSetMutedCallAction : CXCallAction`
open class CXSetMutedCallAction: CXCallAction {
    /// `init(call callUUID: UUID, muted: Bool)`
    public init(call callUUID: UUID, muted: Bool) { unavailable() }
    /// `var isMuted: Bool`
    open var isMuted: Bool = false
}

/// `class CXPlayDTMFCallAction : CXCallAction`
open class CXPlayDTMFCallAction: CXCallAction {
    /// `var digits: String`
    open var digits: String = ""
}

/// `class CXSetGroupCallAction : CXCallAction`
open class CXSetGroupCallAction: CXCallAction {
    /// `var callUUIDToGroupWith: UUID?`
    open var callUUIDToGroupWith: UUID?
}

/// `class CXTransaction : NSObject`
open class CXTransaction: NSObject {
    /// `convenience init(action: CXAction)`
    public convenience init(action: CXAction) { unavailable() }
    /// `var actions: [CXAction] { get }`
    open var actions: [CXAction] { unavailable() }
}

/// `class CXProviderConfiguration : NSObject`
open class CXProviderConfiguration: NSObject {
    /// `var supportsVideo: Bool`
    open var supportsVideo: Bool = false
    /// `var maximumCallGroups: Int`
    open var maximumCallGroups: Int = 2
    /// `var maximumCallsPerCallGroup: Int`
    open var maximumCallsPerCallGroup: Int = 5
    /// `var supportedHandleTypes: Set<CXHandle.HandleType>`
    open var supportedHandleTypes: Set<CXHandle.HandleType> = []
    /// `var includesCallsInRecents: Bool`
    open var includesCallsInRecents: Bool = true
}

/// `protocol CXProviderDelegate : NSObjectProtocol`
public protocol CXProviderDelegate: NSObjectProtocol {
    /// `func providerDidReset(_ provider: CXProvider)`
    func providerDidReset(_ provider: CXProvider)
    /// `optional func provider(_ provider: CXProvider, execute transaction: CXTransaction) -> Bool`
    func provider(_ provider: CXProvider, execute transaction: CXTransaction) -> Bool
    /// `optional func provider(_ provider: CXProvider, perform action: CXStartCallAction)`
    func provider(_ provider: CXProvider, perform action: CXStartCallAction)
    /// `optional func provider(_ provider: CXProvider, perform action: CXAnswerCallAction)`
    func provider(_ provider: CXProvider, perform action: CXAnswerCallAction)
    /// `optional func provider(_ provider: CXProvider, perform action: CXEndCallAction)`
    func provider(_ provider: CXProvider, perform action: CXEndCallAction)
    /// `optional func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction)`
    func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction)
    /// `optional func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction)`
    func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction)
    /// `optional func provider(_ provider: CXProvider, perform action: CXSetGroupCallAction)`
    func provider(_ provider: CXProvider, perform action: CXSetGroupCallAction)
    /// `optional func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction)`
    func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction)
    /// `optional func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession)`
    func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession)
    /// `optional func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession)`
    func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession)
}

/// `class CXProvider : NSObject`
open class CXProvider: NSObject {
    /// `init(configuration: CXProviderConfiguration)`
    public init(configuration: CXProviderConfiguration) { unavailable() }

    /// `func setDelegate(_ delegate: (any CXProviderDelegate)?, queue: dispatch_queue_t?)`
    open func setDelegate(_ delegate: (any CXProviderDelegate)?, queue: DispatchQueue?) { unavailable() }

    /// `func reportNewIncomingCall(with UUID: UUID, update: CXCallUpdate, completion: @escaping @Sendable ((any Error)?) -> Void)`
    open func reportNewIncomingCall(with uuid: UUID, update: CXCallUpdate, completion: @escaping @Sendable ((any Error)?) -> Void) {
        unavailable()
    }

    /// `class func reportNewIncomingVoIPPushPayload(_ dictionaryPayload: [AnyHashable : Any], completion: (@Sendable ((any Error)?) -> Void)? = nil)` (iOS 14.5+)
    open class func reportNewIncomingVoIPPushPayload(
        _ dictionaryPayload: [AnyHashable: Any], completion: (@Sendable ((any Error)?) -> Void)? = nil
    ) { unavailable() }

    /// `func reportCall(with UUID: UUID, updated update: CXCallUpdate)`
    open func reportCall(with uuid: UUID, updated update: CXCallUpdate) { unavailable() }

    /// `func reportCall(with UUID: UUID, endedAt dateEnded: Date?, reason endedReason: CXCallEndedReason)`
    open func reportCall(with uuid: UUID, endedAt dateEnded: Date?, reason endedReason: CXCallEndedReason) { unavailable() }

    /// `func reportOutgoingCall(with UUID: UUID, startedConnectingAt dateStartedConnecting: Date?)`
    open func reportOutgoingCall(with uuid: UUID, startedConnectingAt dateStartedConnecting: Date?) { unavailable() }

    /// `func reportOutgoingCall(with UUID: UUID, connectedAt dateConnected: Date?)`
    open func reportOutgoingCall(with uuid: UUID, connectedAt dateConnected: Date?) { unavailable() }
}

/// `class CXCallController : NSObject`
open class CXCallController: NSObject {
    /// `init()`
    public override init() { unavailable() }

    /// `func request(_ transaction: CXTransaction, completion: @escaping @Sendable ((any Error)?) -> Void)`
    open func request(_ transaction: CXTransaction, completion: @escaping @Sendable ((any Error)?) -> Void) { unavailable() }
}
