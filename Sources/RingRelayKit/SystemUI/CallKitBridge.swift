#if canImport(CallKit) && os(iOS)
    import AVFAudio
    import CallKit
    import Foundation

    /// The SDK's ``SystemCallUI`` on CallKit: reports calls to a `CXProvider`, and hands every
    /// CallKit action to ``CallManager/perform(_:for:)``, which decides what becomes of it.
    ///
    /// ```swift
    /// let bridge = CallKitBridge()
    /// let client = RingRelayClient(configuration: configuration, systemUI: bridge, accessToken: fetchToken)
    /// bridge.attach(client.calls)
    /// ```
    ///
    /// - Answer is fulfilled only when the server confirms that this device won the call, and
    ///   failed when it was answered elsewhere or cancelled meanwhile.
    /// - End, hold, mute and DTMF are fulfilled at once when the call allows them. Mute changes and
    ///   DTMF digits reach the app as ``CallManager/Event/muteChanged(_:isMuted:)`` and
    ///   ``CallManager/Event/dtmf(_:digits:)``, for its media engine.
    /// - Every other action (grouping calls, any action a later iOS adds) is failed at once,
    ///   never left to time out.
    // @unchecked: CXProvider and CXCallController may be used from any queue; the bridge's own
    // mutable state is guarded by `lock`.
    public final class CallKitBridge: NSObject, SystemCallUI, CXProviderDelegate, @unchecked Sendable {
        private let provider: CXProvider
        private let controller = CXCallController()
        private let lock = NSLock()
        private weak var manager: CallManager?
        private var pendingAnswers: [UUID: CXAnswerCallAction] = [:]
        private var audioSessionHandler: ((AVAudioSession, Bool) -> Void)?

        /// Creates the bridge with its own provider.
        public init(configuration: CXProviderConfiguration = CallKitBridge.defaultConfiguration()) {
            provider = CXProvider(configuration: configuration)
            super.init()
            provider.setDelegate(self, queue: nil)
        }

        /// The configuration the bridge uses unless given another: two call groups of one call
        /// each (hold and swap between two calls), generic handles, calls in Recents.
        public static func defaultConfiguration(supportsVideo: Bool = false) -> CXProviderConfiguration {
            let configuration = CXProviderConfiguration()
            configuration.supportsVideo = supportsVideo
            configuration.maximumCallGroups = 2
            configuration.maximumCallsPerCallGroup = 1
            configuration.supportedHandleTypes = [.generic]
            configuration.includesCallsInRecents = true
            return configuration
        }

        /// Connects the bridge to the calls it shows.
        public func attach(_ manager: CallManager) {
            lock.withLock { self.manager = manager }
        }

        /// Called when CallKit activates (`true`) or deactivates (`false`) the audio session:
        /// start and stop the call's audio there.
        public func onAudioSession(_ handler: @escaping (AVAudioSession, Bool) -> Void) {
            lock.withLock { audioSessionHandler = handler }
        }

        private var attachedManager: CallManager? { lock.withLock { manager } }

        // MARK: SystemCallUI

        public func reportIncomingCall(_ report: IncomingCallReport, completion: @escaping @Sendable ((any Error)?) -> Void) {
            provider.reportNewIncomingCall(with: report.uuid, update: Self.update(for: report), completion: completion)
        }

        private static func update(for report: IncomingCallReport) -> CXCallUpdate {
            let update = CXCallUpdate()
            update.remoteHandle = CXHandle(type: .generic, value: report.caller.identity)
            update.localizedCallerName = report.caller.displayText
            update.hasVideo = report.hasVideo
            return update
        }

        public func reportIncomingCallUpdated(_ report: IncomingCallReport) {
            provider.reportCall(with: report.uuid, updated: Self.update(for: report))
        }

        public func reportOutgoingCallStarted(_ report: OutgoingCallReport) {
            let action = CXStartCallAction(call: report.uuid, handle: CXHandle(type: .generic, value: report.callee.identity))
            action.isVideo = report.hasVideo
            controller.request(CXTransaction(action: action)) { _ in }
        }

        public func reportOutgoingCallConnected(uuid: UUID) {
            provider.reportOutgoingCall(with: uuid, connectedAt: nil)
        }

        public func reportCallEnded(uuid: UUID, reason: CallEndReason) {
            provider.reportCall(with: uuid, endedAt: nil, reason: CXCallEndedReason(rawValue: reason.rawValue) ?? .failed)
        }

        public func reportCallEndedByUser(uuid: UUID) {
            controller.request(CXTransaction(action: CXEndCallAction(call: uuid))) { _ in }
        }

        public func reportCallHeld(uuid: UUID, onHold: Bool) {
            controller.request(CXTransaction(action: CXSetHeldCallAction(call: uuid, onHold: onHold))) { _ in }
        }

        public func reportCallMuted(uuid: UUID, muted: Bool) {
            // CallKit sends the action back to `perform`, where it is fulfilled: the call is muted already.
            controller.request(CXTransaction(action: CXSetMutedCallAction(call: uuid, muted: muted))) { _ in }
        }

        public func fulfillAnswer(uuid: UUID) {
            if let action = takePendingAnswer(uuid) {
                action.fulfill()
            } else {
                // Answered in the app's own UI: let CallKit know; its action comes back to
                // `perform` and is fulfilled at once, the call being connected already.
                controller.request(CXTransaction(action: CXAnswerCallAction(call: uuid))) { _ in }
            }
        }

        public func failAnswer(uuid: UUID) {
            takePendingAnswer(uuid)?.fail()
        }

        private func takePendingAnswer(_ uuid: UUID) -> CXAnswerCallAction? {
            lock.withLock { pendingAnswers.removeValue(forKey: uuid) }
        }

        // MARK: CXProviderDelegate

        public func providerDidReset(_ provider: CXProvider) {
            guard let manager = attachedManager else { return }
            for call in manager.calls {
                let uuid = call.uuid
                Task { try? await manager.end(uuid: uuid, origin: .systemUI) }
            }
        }

        public func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) {
            // Kept until the server confirms: `fulfillAnswer` or `failAnswer` settles it.
            lock.withLock { pendingAnswers[action.callUUID] = action }
            settle(action, .answer)
        }

        public func provider(_ provider: CXProvider, perform action: CXEndCallAction) { settle(action, .end) }

        public func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction) { settle(action, .setHeld(action.isOnHold)) }

        public func provider(_ provider: CXProvider, perform action: CXSetMutedCallAction) { settle(action, .setMuted(action.isMuted)) }

        public func provider(_ provider: CXProvider, perform action: CXPlayDTMFCallAction) { settle(action, .playDTMF(action.digits)) }

        public func provider(_ provider: CXProvider, perform action: CXSetGroupCallAction) {
            settle(action, .setGroup(action.callUUIDToGroupWith))
        }

        public func provider(_ provider: CXProvider, perform action: CXStartCallAction) { settle(action, .start) }

        /// Fails at once the actions of a transaction that no `perform` method above takes (kinds
        /// a later iOS adds), so that none waits for its timeout; the provider then performs the
        /// rest as usual.
        public func provider(_ provider: CXProvider, execute transaction: CXTransaction) -> Bool {
            for action in transaction.actions where !Self.hasPerformMethod(action) {
                let request = SystemCallAction.other(String(describing: type(of: action)))
                complete(action, (action as? CXCallAction).flatMap { attachedManager?.perform(request, for: $0.callUUID) } ?? .unsupported)
            }
            return false
        }

        /// Whether one of the `perform` methods above takes `action`.
        private static func hasPerformMethod(_ action: CXAction) -> Bool {
            switch action {
            case is CXAnswerCallAction, is CXEndCallAction, is CXSetHeldCallAction, is CXSetMutedCallAction, is CXPlayDTMFCallAction,
                is CXSetGroupCallAction, is CXStartCallAction:
                true
            default:
                false
            }
        }

        /// Hands a CallKit action to the manager and fulfils or fails it as the manager says; a
        /// pending answer is left to `fulfillAnswer` and `failAnswer`.
        private func settle(_ action: CXCallAction, _ request: SystemCallAction) {
            let uuid = action.callUUID
            let outcome: SystemCallActionOutcome
            if let manager = attachedManager {
                outcome = manager.perform(request, for: uuid)
            } else {
                // Nothing to act on yet; ending is still allowed, so the user can always hang up.
                outcome = request == .end ? .fulfilled : .failed
            }
            if outcome == .pending { return }
            if action is CXAnswerCallAction { _ = takePendingAnswer(uuid) }
            if outcome == .fulfilled, request == .start {
                provider.reportOutgoingCall(with: uuid, startedConnectingAt: nil)
            }
            complete(action, outcome)
        }

        private func complete(_ action: CXAction, _ outcome: SystemCallActionOutcome) {
            switch outcome {
            case .fulfilled: action.fulfill()
            case .failed, .unsupported: action.fail()
            case .pending: break
            }
        }

        public func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession) {
            lock.withLock { audioSessionHandler }?(audioSession, true)
        }

        public func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession) {
            lock.withLock { audioSessionHandler }?(audioSession, false)
        }
    }
#endif
