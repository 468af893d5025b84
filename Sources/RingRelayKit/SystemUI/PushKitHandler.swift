#if canImport(PushKit) && os(iOS)
    import Foundation
    import PushKit

    /// The PushKit side of an app: registers the VoIP token with RingRelay, and hands every VoIP
    /// push to the call manager, which reports it to CallKit before PushKit's completion runs.
    ///
    /// Create it at launch (`application(_:didFinishLaunchingWithOptions:)`) and keep it: PushKit
    /// delivers pushes that arrived while the app was not running as soon as the registry exists.
    public final class PushKitHandler: NSObject, PKPushRegistryDelegate {
        private let registry: PKPushRegistry
        private let client: RingRelayClient
        private let environment: PushEnvironment
        private let onError: @Sendable (RingRelayError) -> Void

        /// Starts receiving VoIP pushes.
        ///
        /// - Parameters:
        ///   - client: the client to register the token with and to hand pushes to.
        ///   - environment: `.sandbox` for builds run from Xcode, `.production` otherwise.
        ///   - queue: where PushKit calls the handler.
        ///   - onError: told when registering or unregistering the token failed.
        public init(
            client: RingRelayClient, environment: PushEnvironment, queue: DispatchQueue = .main,
            onError: @escaping @Sendable (RingRelayError) -> Void = { _ in }
        ) {
            self.client = client
            self.environment = environment
            self.onError = onError
            self.registry = PKPushRegistry(queue: queue)
            super.init()
            registry.delegate = self
            registry.desiredPushTypes = [.voIP]
        }

        public func pushRegistry(_ registry: PKPushRegistry, didUpdate credentials: PKPushCredentials, for type: PKPushType) {
            guard type == .voIP else { return }
            let (client, token, environment, onError) = (client, credentials.token, environment, onError)
            Task {
                do throws(RingRelayError) {
                    try await client.register(pushToken: token, type: .apnsVoIP, environment: environment)
                } catch {
                    onError(error)
                }
            }
        }

        public func pushRegistry(_ registry: PKPushRegistry, didInvalidatePushTokenFor type: PKPushType) {
            guard type == .voIP else { return }
            let (client, onError) = (client, onError)
            Task {
                do throws(RingRelayError) {
                    try await client.unregister(type: .apnsVoIP)
                } catch {
                    onError(error)
                }
            }
        }

        public func pushRegistry(
            _ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType,
            completion: @escaping () -> Void
        ) {
            guard type == .voIP else {
                completion()
                return
            }
            // Reports to CallKit synchronously, whatever the payload holds.
            client.calls.handlePush(payload.dictionaryPayload)
            // Later changes of the call (cancelled, answered elsewhere) come over the live connection.
            let client = client
            Task { await client.connect() }
            completion()
        }
    }
#endif
