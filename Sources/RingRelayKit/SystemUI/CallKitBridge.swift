#if canImport(CallKit) && os(iOS)
    import AVFAudio
    import CallKit
    import Foundation

    /// The SDK's ``SystemCallUI`` on CallKit: reports calls to a `CXProvider`, and turns the user's
    /// CallKit actions (answer, end, hold) into ``CallManager`` actions.
    ///
    /// ```swift
    /// let bridge = CallKitBridge()
    /// let client = RingRelayClient(configuration: configuration, systemUI: bridge, accessToken: fetchToken)
    /// bridge.attach(client.calls)
    /// ```
    ///
    /// An answer from the CallKit UI is fulfilled only when the server confirms that this device
    /// won the call, and failed when it was answered elsewhere or cancelled meanwhile.
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
            let update = CXCallUpdate()
            update.remoteHandle = CXHandle(type: .generic, value: report.caller.identity)
            update.localizedCallerName = report.caller.displayText
            update.hasVideo = report.hasVideo
            provider.reportNewIncomingCall(with: report.uuid, update: update, completion: completion)
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
            guard let manager = attachedManager else {
                action.fail()
                return
            }
            let uuid = action.callUUID
            lock.withLock { pendingAnswers[uuid] = action }
            Task { try? await manager.answer(uuid: uuid, origin: .systemUI) }
        }

        public func provider(_ provider: CXProvider, perform action: CXEndCallAction) {
            let uuid = action.callUUID
            if let manager = attachedManager {
                Task { try? await manager.end(uuid: uuid, origin: .systemUI) }
            }
            action.fulfill()
        }

        public func provider(_ provider: CXProvider, perform action: CXSetHeldCallAction) {
            do {
                try attachedManager?.setHeld(uuid: action.callUUID, onHold: action.isOnHold, origin: .systemUI)
                action.fulfill()
            } catch {
                action.fail()
            }
        }

        public func provider(_ provider: CXProvider, perform action: CXStartCallAction) {
            provider.reportOutgoingCall(with: action.callUUID, startedConnectingAt: nil)
            action.fulfill()
        }

        public func provider(_ provider: CXProvider, didActivate audioSession: AVAudioSession) {
            lock.withLock { audioSessionHandler }?(audioSession, true)
        }

        public func provider(_ provider: CXProvider, didDeactivate audioSession: AVAudioSession) {
            lock.withLock { audioSessionHandler }?(audioSession, false)
        }
    }
#endif
