import Crypto
import Foundation
import RingRelayKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The phone's P-256 key for sealed calls, in a PEM file only its owner can read, and the files
/// kept beside it: the invites opened (replays), the callees' keys sealed to (trust on first
/// use), and the binding that carries the key.
///
/// The file is created on first use and reused after, so callers who sealed to this phone before
/// keep trusting it. It is never printed; a file that others may read is refused, as `ssh`
/// refuses a private key with loose permissions.
struct PhoneKeyFile: Sendable {
    /// Why a key file cannot be used. The message names the path, never the key.
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The key file's path.
    let url: URL
    /// The key.
    let privateKey: P256.KeyAgreement.PrivateKey
    /// Whether this run created the file.
    let created: Bool

    /// Loads the key at `path`, or creates it (mode 0600) when there is no file.
    ///
    /// - Throws: ``Failure`` when the file is not a P-256 private key in PEM, may be read by
    ///   others, or cannot be read or written.
    static func loadOrCreate(at path: String) throws -> PhoneKeyFile {
        let url = URL(fileURLWithPath: path)
        if let key = try load(url) {
            return PhoneKeyFile(url: url, privateKey: key, created: false)
        }
        let key = P256.KeyAgreement.PrivateKey()
        guard try write(key, to: url) else {
            // Another phone created it between our look and our write: use that one.
            guard let key = try load(url) else { throw Failure(description: "The key file \(path) vanished while it was created.") }
            return PhoneKeyFile(url: url, privateKey: key, created: false)
        }
        return PhoneKeyFile(url: url, privateKey: key, created: true)
    }

    /// The key in `url`, or `nil` when there is no such file.
    private static func load(_ url: URL) throws -> P256.KeyAgreement.PrivateKey? {
        // Foundation's attributes rather than stat(2): the C struct's members are not visible
        // from this module in a release build (MemberImportVisibility finds them in CoreFoundation).
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        let mode: Int
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
        } catch {
            throw Failure(description: "The key file \(url.path) cannot be read.")
        }
        guard mode & 0o077 == 0 else {
            throw Failure(
                description: "The key file \(url.path) may be read by others (mode \(String(mode & 0o777, radix: 8))); "
                    + "run chmod 600 on it, or give a new path to make a new key.")
        }
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw Failure(description: "The key file \(url.path) cannot be read.")
        }
        do {
            return try P256.KeyAgreement.PrivateKey(pemRepresentation: text)
        } catch {
            throw Failure(description: "The key file \(url.path) is not a P-256 private key in PEM.")
        }
    }

    /// Writes `key` to a new file that only its owner can read.
    ///
    /// - Returns: `false` when the file exists already.
    private static func write(_ key: P256.KeyAgreement.PrivateKey, to url: URL) throws -> Bool {
        // O_EXCL with mode 0600: the key is never in a file others could open, not even briefly.
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { return false }
            throw Failure(description: "The key file \(url.path) cannot be created: \(String(cString: strerror(errno))).")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: Data((key.pemRepresentation + "\n").utf8))
            try handle.synchronize()
        } catch {
            unlink(url.path)
            throw Failure(description: "The key file \(url.path) cannot be written.")
        }
        return true
    }

    /// The invites this phone opened, beside the key: `<key file>.opened-invites.json`.
    var replayStore: InviteReplayStore {
        InviteReplayStore(fileURL: sibling("opened-invites.json"))
    }

    /// The callees' keys this phone sealed to: `<key file>.known-device-keys.json`.
    var knownKeys: KnownDeviceKeys {
        KnownDeviceKeys(fileURL: sibling("known-device-keys.json"))
    }

    /// The binding that carries this key: `<key file>.bindings.json`.
    var bindingStore: PhoneBindingFile {
        PhoneBindingFile(url: sibling("bindings.json"))
    }

    private func sibling(_ suffix: String) -> URL {
        url.deletingLastPathComponent().appendingPathComponent(url.lastPathComponent + "." + suffix)
    }

    /// The token of the phone's key binding: SHA-256 of the public key, as hex. The same key
    /// registers the same token, so every run updates one binding (same id: callers' trust on
    /// first use sees no change).
    var bindingToken: String {
        SHA256.hash(data: privateKey.publicKey.x963Representation).map { String(format: "%02x", $0) }.joined()
    }
}
