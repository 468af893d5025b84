import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A small file that several processes change in turn (an app and its Notification Service
/// Extension, through their app group's container): each change holds an exclusive `flock` on
/// a lock file beside it and replaces the file atomically, so a reader never sees half a write
/// and no change is lost.
struct LockedFile: Sendable {
    /// The file.
    let url: URL

    /// The lock file: `<file>.lock`. Kept apart from the file, which a rename replaces.
    private var lockPath: String { url.path + ".lock" }

    /// Why the file could not be used.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Reads the file under the lock (`nil` when it does not exist yet), lets `body` change the
    /// bytes, and writes them back when they changed, all before the lock is released.
    func update<T>(_ body: (inout Data?) throws -> T) throws -> T {
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure(description: "Cannot open the lock file \(lockPath): \(Self.errorText())") }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw Failure(description: "Cannot lock \(lockPath): \(Self.errorText())") }
        }
        defer { flock(descriptor, LOCK_UN) }

        var original: Data?
        // Every writer holds the lock: the file cannot appear or vanish between these two steps.
        if FileManager.default.fileExists(atPath: url.path) {
            do {
                original = try Data(contentsOf: url)
            } catch {
                throw Failure(description: "Cannot read \(url.path): \(error.localizedDescription)")
            }
        }
        var contents = original
        let result = try body(&contents)
        if let contents, contents != original {
            do {
                try contents.write(to: url, options: .atomic)
            } catch {
                throw Failure(description: "Cannot write \(url.path): \(error.localizedDescription)")
            }
        }
        return result
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
