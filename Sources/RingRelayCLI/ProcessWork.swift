import Foundation

/// What a process has done so far, read from `/proc` (Linux): its CPU time, and counts of its
/// work that do not depend on how busy the machine is.
///
/// CPU time per webhook swings by ±15 % between runs of the same binary on the project's shared
/// two cores, and this machine counts no instructions (no hardware counters for `perf`, and
/// valgrind stops on Swift binaries). System calls, bytes written and context switches per
/// webhook stay within a few per cent, so a change that removes work shows in them run to run.
struct ProcessWork: Sendable {
    /// User and system CPU time.
    var cpuSeconds: Double
    /// Read-class system calls (`syscr`: read, readv, pread, recv…), the process's dead threads included.
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

    /// The process's figures now; `nil` where `/proc` cannot tell (not Linux, or the process is gone).
    static func of(pid: Int32) -> ProcessWork? {
        guard let cpu = ProcessMemory.cpuSeconds(pid: pid), let io = ProcessMemory.procText("/proc/\(pid)/io") else { return nil }
        var fields: [Substring: Int] = [:]
        for line in io.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, let value = Int(parts[1].trimmingCharacters(in: .whitespaces)) { fields[parts[0]] = value }
        }
        guard let reads = fields["syscr"], let writes = fields["syscw"], let written = fields["wchar"] else { return nil }
        return ProcessWork(
            cpuSeconds: cpu, readCalls: reads, writeCalls: writes, bytesWritten: written, storageBytes: fields["write_bytes"] ?? 0,
            contextSwitches: contextSwitches(pid: pid))
    }

    /// The work done since `start`, per unit (a webhook, a push).
    func per(_ units: Int, since start: ProcessWork) -> WorkPerUnit {
        let count = Double(max(units, 1))
        return WorkPerUnit(
            cpuMicroseconds: (cpuSeconds - start.cpuSeconds) * 1e6 / count,
            readCalls: Double(readCalls - start.readCalls) / count,
            writeCalls: Double(writeCalls - start.writeCalls) / count,
            kibWritten: Double(bytesWritten - start.bytesWritten) / 1024 / count,
            kibToStorage: Double(storageBytes - start.storageBytes) / 1024 / count,
            contextSwitches: Double(contextSwitches - start.contextSwitches) / count)
    }

    private static func contextSwitches(pid: Int32) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { total, task in
            guard let status = ProcessMemory.procText("/proc/\(pid)/task/\(task)/status") else { return total }
            return status.split(separator: "\n").reduce(total) { sum, line in
                guard line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:"),
                    let value = line.split(separator: ":").last.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) })
                else { return sum }
                return sum + value
            }
        }
    }
}

/// A process's work per unit over a measurement (``ProcessWork/per(_:since:)``).
struct WorkPerUnit: Codable, Sendable {
    var cpuMicroseconds: Double
    var readCalls: Double
    var writeCalls: Double
    var kibWritten: Double
    var kibToStorage: Double
    var contextSwitches: Double

    /// "1.91 read and 11.95 write system calls, 22.0 KiB written (20.8 KiB to storage), 1.62 context switches a webhook"
    func text(per unit: String) -> String {
        String(
            format: "%.2f read and %.2f write system calls, %.1f KiB written (%.1f KiB to storage), %.2f context switches",
            readCalls, writeCalls, kibWritten, kibToStorage, contextSwitches) + " a \(unit)"
    }
}
