import ArgumentParser
import Foundation
import RingRelayServer
import RingRelayStore

/// `ringrelay backup <file>`: a consistent copy of a server's database, safe while it runs.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the database to a new file, safely while `ringrelay serve` runs.",
        discussion: """
            Writes one committed state of the data directory's database to FILE with SQLite's online backup API \
            (the server keeps serving meanwhile; the database is only read: no migration, no setting changed), \
            with mode 0600: it holds credentials and keys. To restore, stop the server and put the file in place \
            of ringrelay.sqlite (removing ringrelay.sqlite-wal and -shm).
            """)

    @Argument(help: "The new file to write (it must not exist).") var file: String
    @Option(help: "The server's data directory. [env: RINGRELAY_DATA_DIR] (default: ./ringrelay-data)") var dataDir: String?

    func run() async throws {
        if ProcessInfo.processInfo.environment["RINGRELAY_DATABASE_URL", default: ""].isEmpty == false {
            throw ValidationError("RINGRELAY_DATABASE_URL is set: the server keeps its data in PostgreSQL. Back that up with pg_dump.")
        }
        let directory = dataDir ?? ProcessInfo.processInfo.environment["RINGRELAY_DATA_DIR"] ?? ServerConfiguration().dataDirectory
        let database = URL(fileURLWithPath: directory).appendingPathComponent(Bootstrap.databaseFile).path
        guard FileManager.default.fileExists(atPath: database) else {
            throw ValidationError("No database at \(database); pass the server's --data-dir.")
        }
        umask(0o077)
        try await SQLiteStore.backup(databaseAt: database, to: file)
        print("Backed up \(database) to \(file).")
    }
}
