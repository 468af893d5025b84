import Foundation
import RingRelayWire

/// How a callee's device keys differ from the ones this device sealed to before (trust on first
/// use). Show it to the user the way messengers show a changed safety number: a new or changed
/// key may be a new phone, or someone the server let in.
public struct DeviceKeyChange: Sendable, Hashable {
    /// One device key, by the binding that carries it.
    public struct Key: Sendable, Hashable {
        /// The binding (`bnd_…`).
        public var bindingId: String
        /// The device, when the binding names one.
        public var deviceId: String?
        /// The key's fingerprint.
        public var keyId: DeviceKeyID

        /// Creates a key.
        public init(bindingId: String, deviceId: String?, keyId: DeviceKeyID) {
            self.bindingId = bindingId
            self.deviceId = deviceId
            self.keyId = keyId
        }
    }

    /// The callee.
    public var identity: String
    /// Keys of bindings not seen before.
    public var added: [Key]
    /// Bindings seen before that no longer have a key (removed, or invalidated).
    public var removed: [Key]
    /// Bindings seen before whose key is now another one.
    public var changed: [Replacement]

    /// A binding's key, before and now.
    public struct Replacement: Sendable, Hashable {
        /// The key sealed to before.
        public var before: Key
        /// The key the directory lists now.
        public var now: Key

        /// Creates a replacement.
        public init(before: Key, now: Key) {
            self.before = before
            self.now = now
        }
    }
}

/// The device keys this device has sealed invites to, per callee, kept in a file: what trust on
/// first use compares the key directory with.
///
/// The first sealed call to an identity records its keys and reports nothing; every later one
/// reports how they changed (``DeviceKeyChange``) and records the new set.
public struct KnownDeviceKeys: Sendable {
    /// The file, created at first use.
    public let fileURL: URL

    private let file: LockedFile

    /// Creates a store on `fileURL`.
    public init(fileURL: URL) {
        self.fileURL = fileURL
        file = LockedFile(url: fileURL)
    }

    /// One remembered key.
    private struct Entry: Codable, Equatable {
        var keyId: DeviceKeyID
        var deviceId: String?
    }

    /// The file's content: identity → binding id → key.
    private struct Contents: Codable {
        var v = 1
        var identities: [String: [String: Entry]] = [:]
    }

    /// Compares `keys`, the key directory's answer for `identity`, with what was recorded, and
    /// records it.
    ///
    /// - Returns: the change, or `nil` on first contact and when nothing changed.
    /// - Throws: when the file cannot be read or written.
    public func record(_ keys: [DeviceKeyResource], of identity: String) throws -> DeviceKeyChange? {
        let current = Dictionary(
            keys.compactMap { key in DeviceKeyID(publicKey: key.publicKey).map { (key.bindingId, Entry(keyId: $0, deviceId: key.deviceId)) } },
            uniquingKeysWith: { first, _ in first })
        return try file.update { data in
            var contents = try data.map { try JSONDecoder().decode(Contents.self, from: $0) } ?? Contents()
            let known = contents.identities[identity]
            contents.identities[identity] = current
            data = try JSONEncoder.sorted.encode(contents)
            guard let known else { return nil }
            func key(_ bindingId: String, _ entry: Entry) -> DeviceKeyChange.Key {
                DeviceKeyChange.Key(bindingId: bindingId, deviceId: entry.deviceId, keyId: entry.keyId)
            }
            let change = DeviceKeyChange(
                identity: identity,
                added: current.filter { known[$0.key] == nil }.sorted { $0.key < $1.key }.map(key),
                removed: known.filter { current[$0.key] == nil }.sorted { $0.key < $1.key }.map(key),
                changed: current.compactMap { bindingId, now in
                    guard let before = known[bindingId], before.keyId != now.keyId else { return nil }
                    return DeviceKeyChange.Replacement(before: key(bindingId, before), now: key(bindingId, now))
                }.sorted { $0.now.bindingId < $1.now.bindingId })
            return change.added.isEmpty && change.removed.isEmpty && change.changed.isEmpty ? nil : change
        }
    }
}
