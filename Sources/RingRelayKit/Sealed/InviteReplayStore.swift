import Foundation

/// The sealed invites this device has opened, kept in a file until each expires, so that a box
/// delivered twice (a replay, or the same call by two channels) is opened once.
///
/// An invite is forgotten only once it has expired: forgetting one that has not would let it
/// open again (an attacker able to make boxes would open ``capacity`` fresh ones, then replay an
/// old one). When ``capacity`` unexpired invites are remembered, a new one is refused instead
/// (``Full``); the opener refuses at most ``SealedInviteOpener/maximumLifetime`` ahead, so the
/// oldest expire within 5 minutes and the store takes invites again.
///
/// An app and its Notification Service Extension open invites in two processes: give both the
/// same file in their app group's container
/// (`FileManager.default.containerURL(forSecurityApplicationGroupIdentifier:)`). Changes hold
/// a lock and replace the file atomically (see ``LockedFile``), so two processes or two
/// instances never both accept one invite.
public struct InviteReplayStore: Sendable {
    /// The file, created at first use.
    public let fileURL: URL
    /// How many unexpired invites are remembered at most: far more than can ring within one
    /// invite's lifetime. When it is reached, new invites are refused until some expire.
    public let capacity: Int

    /// The store remembers ``capacity`` invites that have not expired: a new one cannot be
    /// recorded without forgetting one that could then be replayed.
    public struct Full: Error, Sendable, Hashable {}

    private let file: LockedFile

    /// Creates a store on `fileURL`.
    public init(fileURL: URL, capacity: Int = 1024) {
        self.fileURL = fileURL
        self.capacity = max(1, capacity)
        file = LockedFile(url: fileURL)
    }

    /// The file's content: invite id → expiry, seconds since 1970.
    private struct Contents: Codable {
        var v = 1
        var invites: [String: Double] = [:]
    }

    /// Records that `inviteId` was opened, unless it was before; forgets invites that expired.
    ///
    /// - Returns: `false` when the invite was recorded before (a replay).
    /// - Throws: ``Full`` when ``capacity`` unexpired invites are recorded; an error when the file
    ///   cannot be read or written. Treat both as a refusal: a replay cannot be ruled out.
    public func recordFirstOpening(of inviteId: String, expiresAt: Date, now: Date) throws -> Bool {
        try file.update { data in
            var contents = try data.map { try JSONDecoder().decode(Contents.self, from: $0) } ?? Contents()
            let nowSeconds = now.timeIntervalSince1970
            contents.invites = contents.invites.filter { $0.value > nowSeconds }
            guard contents.invites[inviteId] == nil else {
                data = try JSONEncoder.sorted.encode(contents)
                return false
            }
            guard contents.invites.count < capacity else {
                // What expired is gone from the file all the same; nothing unexpired is forgotten.
                data = try JSONEncoder.sorted.encode(contents)
                throw Full()
            }
            contents.invites[inviteId] = expiresAt.timeIntervalSince1970
            data = try JSONEncoder.sorted.encode(contents)
            return true
        }
    }

    /// How many invites the file remembers now (for tests and diagnostics).
    public func count() throws -> Int {
        try file.update { data in try data.map { try JSONDecoder().decode(Contents.self, from: $0) }?.invites.count ?? 0 }
    }
}

extension JSONEncoder {
    /// Sorted keys: the same content gives the same bytes, so an unchanged file is not rewritten.
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}
