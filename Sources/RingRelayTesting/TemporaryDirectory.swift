import Foundation

/// A fresh directory under the system's temporary directory, for one test's data.
public struct TemporaryDirectory: Sendable {
    /// The directory's path.
    public let path: String

    /// Creates a new, empty directory.
    public init(prefix: String = "ringrelay-test") throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        self.path = url.path
    }

    /// A path inside the directory.
    public func appending(_ component: String) -> String {
        URL(fileURLWithPath: path).appendingPathComponent(component).path
    }

    /// Removes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
