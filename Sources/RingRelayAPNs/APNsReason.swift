import RingRelayCore

/// Every reason APNs documents, with a fallback that keeps reasons Apple adds later verbatim.
public enum APNsReason: Sendable, Hashable, CustomStringConvertible {
    case badCollapseID, badDeviceToken, badExpirationDate, badMessageID, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIDInToken, badEnvironmentKeyIDInToken, badEnvironmentKeyInToken
    case badPath, methodNotAllowed, expiredToken, unregistered, payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests, internalServerError, serviceUnavailable, shutdown
    /// A reason this version does not know.
    case unknown(String)

    private static let known: [String: APNsReason] = [
        "BadCollapseId": .badCollapseID, "BadDeviceToken": .badDeviceToken, "BadExpirationDate": .badExpirationDate,
        "BadMessageId": .badMessageID, "BadPriority": .badPriority, "BadTopic": .badTopic,
        "DeviceTokenNotForTopic": .deviceTokenNotForTopic, "DuplicateHeaders": .duplicateHeaders, "IdleTimeout": .idleTimeout,
        "InvalidPushType": .invalidPushType, "MissingDeviceToken": .missingDeviceToken, "MissingTopic": .missingTopic,
        "PayloadEmpty": .payloadEmpty, "TopicDisallowed": .topicDisallowed, "BadCertificate": .badCertificate,
        "BadCertificateEnvironment": .badCertificateEnvironment, "ExpiredProviderToken": .expiredProviderToken,
        "Forbidden": .forbidden, "InvalidProviderToken": .invalidProviderToken, "MissingProviderToken": .missingProviderToken,
        "UnrelatedKeyIdInToken": .unrelatedKeyIDInToken, "BadEnvironmentKeyIdInToken": .badEnvironmentKeyIDInToken,
        "BadEnvironmentKeyInToken": .badEnvironmentKeyInToken, "BadPath": .badPath, "MethodNotAllowed": .methodNotAllowed,
        "ExpiredToken": .expiredToken, "Unregistered": .unregistered, "PayloadTooLarge": .payloadTooLarge,
        "TooManyProviderTokenUpdates": .tooManyProviderTokenUpdates, "TooManyRequests": .tooManyRequests,
        "InternalServerError": .internalServerError, "ServiceUnavailable": .serviceUnavailable, "Shutdown": .shutdown,
    ]
    private static let names = Dictionary(uniqueKeysWithValues: known.map { ($1, $0) })

    /// Parses a reason string.
    public init(_ text: String) {
        self = Self.known[text] ?? .unknown(text)
    }

    /// The reason as APNs spells it.
    public var description: String {
        if case .unknown(let text) = self { return text }
        return Self.names[self] ?? "Unknown"
    }
}

/// Maps an APNs answer to what RingRelay does about it.
public enum APNsDispositionRules {
    /// The disposition of a status and reason.
    ///
    /// - Parameters:
    ///   - status: the HTTP status.
    ///   - reason: the parsed reason (`nil` on success).
    ///   - environmentIsCertain: whether the binding's environment was stated by the app. A
    ///     `BadDeviceToken` also means "token of the other environment", so it only kills a
    ///     binding whose environment is known for sure.
    public static func disposition(status: Int, reason: APNsReason?, environmentIsCertain: Bool) -> PushDisposition {
        if status == 200 { return .delivered }
        switch reason {
        case .unregistered?, .expiredToken?, .deviceTokenNotForTopic?:
            return .invalidateBinding
        case .badDeviceToken?:
            return environmentIsCertain ? .invalidateBinding : .drop
        case .topicDisallowed?, .badTopic?, .missingTopic?, .badCertificate?, .badCertificateEnvironment?, .forbidden?,
            .invalidProviderToken?, .missingProviderToken?, .unrelatedKeyIDInToken?, .badEnvironmentKeyIDInToken?,
            .badEnvironmentKeyInToken?:
            return .fixConfiguration
        case .expiredProviderToken?, .tooManyProviderTokenUpdates?, .tooManyRequests?, .idleTimeout?, .internalServerError?,
            .serviceUnavailable?, .shutdown?:
            return .retry
        case .badCollapseID?, .badExpirationDate?, .badMessageID?, .badPriority?, .duplicateHeaders?, .invalidPushType?,
            .missingDeviceToken?, .payloadEmpty?, .badPath?, .methodNotAllowed?, .payloadTooLarge?:
            return .drop
        case .unknown?, nil:
            switch status {
            case 410: return .invalidateBinding
            case 429, 500...599: return .retry
            case 403: return .fixConfiguration
            default: return .drop
            }
        }
    }
}
