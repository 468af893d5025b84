import Foundation
import Logging
import RingRelayCore
import RingRelayStore
import RingRelayWire

/// First-start work of `ringrelay serve`: the data directory, the store, the admin token and the
/// `default` account.
public struct Bootstrap: Sendable {
    /// The opened, migrated store.
    public let store: SQLiteStore
    /// The admin token in force.
    public let adminToken: String
    /// Set only when the token was generated now: print it once.
    public let generatedAdminToken: String?
    /// Set only when the `default` account was created now: print its key once.
    public let defaultAccount: (id: String, apiKey: String)?

    /// The admin token's file inside the data directory.
    public static let adminTokenFile = "admin-token"
    /// The SQLite file inside the data directory.
    public static let databaseFile = "ringrelay.sqlite"

    /// Prepares the data directory and store.
    ///
    /// - Throws: ``RingRelayError`` when the directory cannot be created or read.
    public static func prepare(configuration: ServerConfiguration, logger: Logger) async throws -> Bootstrap {
        let directory = URL(fileURLWithPath: configuration.dataDirectory, isDirectory: true)
        let files = FileManager.default
        do {
            try files.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw RingRelayError(
                .unavailable, code: .dataDirUnusable, "Cannot create the data directory \(directory.path); pass --data-dir with a writable path.",
                underlying: error)
        }
        // Everything the server creates is its own only: the database holds credentials and keys.
        // (umask is per process; `serve` creates no file anyone else should read.)
        umask(0o077)
        if let mode = (try? files.attributesOfItem(atPath: directory.path))?[.posixPermissions] as? Int, mode & 0o077 != 0 {
            logger.warning(
                "the data directory can be read by other users; chmod 700 it",
                metadata: ["data.dir": .string(directory.path), "data.dir.mode": .string(String(mode, radix: 8))])
        }
        let database = directory.appendingPathComponent(databaseFile).path
        let store = try await SQLiteStore.open(path: database, logger: logger, sync: configuration.sqliteSync)
        // Files an older version created 0644 (or a copy restored with a loose mode) are tightened.
        for file in [database, database + "-wal", database + "-shm"] where files.fileExists(atPath: file) {
            try? files.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }

        var generated: String?
        let adminToken: String
        if let configured = configuration.adminToken {
            adminToken = configured
        } else {
            let file = directory.appendingPathComponent(adminTokenFile)
            if let existing = try? String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !existing.isEmpty {
                adminToken = existing
            } else {
                let token = Secrets.generate(prefix: "rra_")
                // Created with 0600 from the start: the secret is never readable by others, not even briefly.
                guard files.createFile(atPath: file.path, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
                    throw RingRelayError(.unavailable, code: .dataDirUnusable, "Cannot write \(file.path).")
                }
                adminToken = token
                generated = token
            }
        }

        // Once per store, not "whenever there are no accounts": an operator who deletes `default`
        // does not get it back on the next start.
        var defaultAccount: (String, String)?
        let attempt = Data(UUID().uuidString.utf8)
        if try await store.setting(named: "bootstrap.default_account", orInsert: { attempt }) == attempt {
            let (created, _) = try await AccountsController.createAccount(named: "default", store: store, now: Date())
            defaultAccount = (created.id, created.apiKey)
        }
        return Bootstrap(store: store, adminToken: adminToken, generatedAdminToken: generated, defaultAccount: defaultAccount)
    }
}
