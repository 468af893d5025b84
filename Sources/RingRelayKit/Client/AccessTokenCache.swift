/// Keeps the current device access token, asking the app's provider only when there is none:
/// at first use, and after the server refused the cached one.
actor AccessTokenCache {
    private let provider: @Sendable () async throws -> String
    private var token: String?
    private var pending: Task<String, any Error>?

    init(provider: @escaping @Sendable () async throws -> String) {
        self.provider = provider
    }

    /// The token to use now; concurrent callers share one provider call.
    func current() async throws(RingRelayError) -> String {
        if let token { return token }
        let task = pending ?? Task { try await provider() }
        pending = task
        do {
            let fresh = try await task.value
            if pending == task {
                token = fresh
                pending = nil
            }
            return fresh
        } catch {
            if pending == task { pending = nil }
            throw .transport("The access-token provider failed: \(error)")
        }
    }

    /// Drops `refused` so the next use asks the provider again (unless a newer token came meanwhile).
    func invalidate(_ refused: String) {
        if token == refused { token = nil }
    }
}
