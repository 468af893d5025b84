import Foundation

/// What a process has done so far, read from `/proc` (Linux): its CPU time, and counts of its
/// work, which depend on the load it is given rather than on how busy the machine is.
///
/// CPU time per webhook swings by ±15 % between runs of the same binary on the project's shared
/// two cores, and this machine counts no instructions (no hardware counters for `perf`, and
/// valgrind stops on Swift binaries). At the same load (a fixed rate: webhooks that come closer
/// together share commits) system calls, bytes written and context switches per webhook stay
/// within a few per cent, so a change that removes work shows in them run to run.
struct ProcessWork: Sendable {
    /// User and system CPU time.
    var cpuSeconds: Double
    /// The counts, where `/proc/<pid>/io` can be read (it takes the right to trace the process,
    /// which a hardened kernel may withhold even from its parent).
    var counts: Counts?

    struct Counts: Sendable {
        /// Read-class system calls (`syscr`: read, readv, pread, recv…), the process's ended threads included.
        var readCalls: Int
        /// Write-class system calls (`syscw`: write, writev, pwrite, send…).
        var writeCalls: Int
        /// Bytes handed to write-class calls: sockets, pipes and files (`wchar`).
        var bytesWritten: Int
        /// Bytes the process caused to be written to storage (`write_bytes`): the SQLite log and file.
        var storageBytes: Int
        /// Voluntary and involuntary context switches of the threads alive now (a thread that ended
        /// takes its count with it; the server's event loops and pool threads live as long as it does).
        var contextSwitches: Int
    }

    /// The process's figures now; `nil` where `/proc` cannot tell its CPU time (not Linux, or the process is gone).
    static func of(pid: Int32) -> ProcessWork? {
        guard let cpu = ProcessMemory.cpuSeconds(pid: pid) else { return nil }
        return ProcessWork(cpuSeconds: cpu, counts: counts(pid: pid))
    }

    /// The work done since `start`, per unit (a webhook, a push).
    func per(_ units: Int, since start: ProcessWork) -> WorkPerUnit {
        let count = Double(max(units, 1))
        var work = WorkPerUnit(cpuMicroseconds: (cpuSeconds - start.cpuSeconds) * 1e6 / count)
        if let now = counts, let then = start.counts {
            work.readCalls = Double(now.readCalls - then.readCalls) / count
            work.writeCalls = Double(now.writeCalls - then.writeCalls) / count
            work.kibWritten = Double(now.bytesWritten - then.bytesWritten) / 1024 / count
            work.kibToStorage = Double(now.storageBytes - then.storageBytes) / 1024 / count
            work.contextSwitches = Double(now.contextSwitches - then.contextSwitches) / count
        }
        return work
    }

    private static func counts(pid: Int32) -> Counts? {
        guard let io = ProcessMemory.procText("/proc/\(pid)/io") else { return nil }
        let fields = ProcessMemory.numbers(io)
        guard let reads = fields["syscr"], let writes = fields["syscw"], let written = fields["wchar"] else { return nil }
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        let switches = tasks.reduce(0) { total, task in
            let status = ProcessMemory.numbers(ProcessMemory.procText("/proc/\(pid)/task/\(task)/status") ?? "")
            return total + (status["voluntary_ctxt_switches"] ?? 0) + (status["nonvoluntary_ctxt_switches"] ?? 0)
        }
        return Counts(readCalls: reads, writeCalls: writes, bytesWritten: written, storageBytes: fields["write_bytes"] ?? 0, contextSwitches: switches)
    }
}

/// A process's work per unit over a measurement (``ProcessWork/per(_:since:)``); the counts are
/// `nil` where `/proc` withheld them.
struct WorkPerUnit: Codable, Sendable {
    var cpuMicroseconds: Double
    var readCalls: Double?
    var writeCalls: Double?
    var kibWritten: Double?
    var kibToStorage: Double?
    var contextSwitches: Double?

    /// "1.91 read and 11.95 write system calls, 22.0 KiB written (20.8 KiB to storage), 1.62 context
    /// switches a webhook", or `nil` without the counts.
    func text(per unit: String) -> String? {
        guard let readCalls, let writeCalls, let kibWritten, let kibToStorage, let contextSwitches else { return nil }
        return String(
            format: "%.2f read and %.2f write system calls, %.1f KiB written (%.1f KiB to storage), %.2f context switches",
            readCalls, writeCalls, kibWritten, kibToStorage, contextSwitches) + " a \(unit)"
    }
}
