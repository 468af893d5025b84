import Foundation

/// Where a sealed box goes: one binding of one identity in one account. HPKE's `info` binds the
/// box to all three, so a box copied to another binding, identity or account does not open.
public struct SealedInviteAddress: Sendable, Hashable {
    /// The account (`acc_…`).
    public var accountId: String
    /// The callee's identity.
    public var identity: String
    /// The callee's binding the box is for (`bnd_…`).
    public var bindingId: String

    /// Creates an address.
    public init(accountId: String, identity: String, bindingId: String) {
        self.accountId = accountId
        self.identity = identity
        self.bindingId = bindingId
    }
}
