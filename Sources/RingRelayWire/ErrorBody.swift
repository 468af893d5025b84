/// The body of every error response: `{"error":{"code","message"}}`.
public struct ErrorBody: Sendable, Hashable, Codable {
    /// The error itself.
    public struct Detail: Sendable, Hashable, Codable {
        /// Stable snake_case code.
        public var code: String
        /// What went wrong and how to fix it.
        public var message: String
        /// For a call command that came too late: the call's current state.
        public var state: String?

        /// Creates a detail.
        public init(code: String, message: String, state: String? = nil) {
            self.code = code
            self.message = message
            self.state = state
        }
    }

    /// The error.
    public var error: Detail

    /// Creates an error body.
    public init(code: String, message: String, state: String? = nil) {
        self.error = Detail(code: code, message: message, state: state)
    }
}
