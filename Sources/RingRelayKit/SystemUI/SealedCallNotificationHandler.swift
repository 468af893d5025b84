#if canImport(CallKit) && canImport(UserNotifications) && os(iOS)
    import CallKit
    import Foundation
    import UserNotifications

    /// The Notification Service Extension of sealed calls: opens the sealed invite of an alert
    /// push, reports it to CallKit (which wakes the app with it as a VoIP push) and shows
    /// nothing. A refused invite shows nothing either; any other notification is left as it is.
    ///
    /// The extension needs the `com.apple.developer.usernotifications.filtering` entitlement
    /// (empty content then shows no alert, and `reportNewIncomingVoIPPushPayload` is allowed)
    /// and an app group shared with the app for the ``InviteReplayStore``. See docs/SDK.md.
    ///
    /// ```swift
    /// final class NotificationService: UNNotificationServiceExtension {
    ///     private let sealedCalls = SealedCallNotificationHandler(opener: SharedSetup.sealedInviteOpener())
    ///
    ///     override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
    ///         sealedCalls.didReceive(request, withContentHandler: contentHandler)
    ///     }
    ///
    ///     override func serviceExtensionTimeWillExpire() {
    ///         sealedCalls.serviceExtensionTimeWillExpire()
    ///     }
    /// }
    /// ```
    // @unchecked: the content handlers are kept under `lock`; UserNotifications calls them from any thread.
    public final class SealedCallNotificationHandler: @unchecked Sendable {
        private let processor: SealedNotificationProcessor
        private let lock = NSLock()
        private var pending: [String: (UNNotificationContent) -> Void] = [:]

        /// Creates the handler.
        public init(opener: any SealedInviteOpening) {
            processor = SealedNotificationProcessor(opener: opener)
        }

        /// Handles a notification: call from `UNNotificationServiceExtension.didReceive(_:withContentHandler:)`.
        public func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
            let identifier = request.identifier
            lock.withLock { pending[identifier] = contentHandler }
            let content = PushParser.parse(request.content.userInfo)
            // Only given back to the handler, on whichever thread finishes.
            nonisolated(unsafe) let original = request.content
            Task {
                switch await processor.process(content) {
                case .reportCall(let payload):
                    let dictionary = payload.foundationObject as? [AnyHashable: Any] ?? [:]
                    CXProvider.reportNewIncomingVoIPPushPayload(dictionary) { _ in
                        // Reported or not (no entitlement, the app refused it), the alert itself shows nothing.
                        self.finish(identifier, with: UNNotificationContent())
                    }
                case .suppress:
                    finish(identifier, with: UNNotificationContent())
                case .passThrough:
                    finish(identifier, with: original)
                }
            }
        }

        /// Out of time: every notification still being opened shows nothing. Call from
        /// `UNNotificationServiceExtension.serviceExtensionTimeWillExpire()`.
        public func serviceExtensionTimeWillExpire() {
            let handlers = lock.withLock { () -> [(UNNotificationContent) -> Void] in
                defer { pending.removeAll() }
                return Array(pending.values)
            }
            for handler in handlers { handler(UNNotificationContent()) }
        }

        /// Hands `content` to the request's handler, once.
        private func finish(_ identifier: String, with content: UNNotificationContent) {
            lock.withLock { pending.removeValue(forKey: identifier) }?(content)
        }
    }
#endif
