// Stub of AVFAudio for scripts/typecheck-apple-sources: only what RingRelayKit uses.
import Foundation

/// `class AVAudioSession : NSObject` (iOS 3.0+): CallKit hands it to the provider's delegate.
open class AVAudioSession: NSObject {}
