import Foundation
import RingRelayCore
import Synchronization

/// Drives a benchmark: `count` operations, either `concurrency` in flight at once (closed loop)
/// or started at a steady `rate` per second whatever their latency (open loop), timing each.
struct LoadGenerator: Sendable {
    /// Operations to run.
    var count: Int
    /// In-flight limit for the closed loop (ignored when `rate` > 0).
    var concurrency: Int
    /// Starts per second; 0 runs the closed loop.
    var rate: Int

    /// Runs `operation(index)` `count` times; it returns whether the operation succeeded.
    func run(_ operation: @escaping @Sendable (Int) async -> Bool) async throws -> (elapsed: Duration, tally: Tally) {
        let tally = Tally()
        let started = ContinuousClock.now
        @Sendable func timed(_ index: Int) async {
            let begin = ContinuousClock.now
            let succeeded = await operation(index)
            tally.record(ContinuousClock.now - begin, succeeded: succeeded, index: index)
        }
        if rate > 0 {
            // Open loop: a discarding group, so finished operations are freed at once instead of
            // waiting to be collected.
            try await withThrowingDiscardingTaskGroup { group in
                for index in 0..<count {
                    try await Task.sleep(until: started + .nanoseconds(Int64(index) * 1_000_000_000 / Int64(rate)), clock: .continuous)
                    group.addTask { await timed(index) }
                }
            }
        } else {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    if index >= concurrency { try await group.next() }
                    group.addTask { await timed(index) }
                }
                try await group.waitForAll()
            }
        }
        return (ContinuousClock.now - started, tally)
    }
}

/// Latencies and failures, collected from concurrent operations.
final class Tally: Sendable {
    /// Each operation's latency, by its index (in the order they finished).
    let samples = Mutex<[(index: Int, latency: Duration)]>([])
    let failures = Mutex(0)

    func record(_ latency: Duration, succeeded: Bool, index: Int) {
        samples.withLock { $0.append((index, latency)) }
        if !succeeded { failures.withLock { $0 += 1 } }
    }

    /// The latencies, fastest first.
    var sorted: [Duration] { samples.withLock { $0.map(\.latency) }.sorted() }

    /// The `p` quantile of each `size` consecutive operations (by index), in milliseconds: in an
    /// open loop, a window is a stretch of time, and shows when the slow ones came.
    func windowPercentilesMs(_ p: Double, windowsOf size: Int) -> [Double] {
        var windows: [[Duration]] = []
        for (index, latency) in samples.withLock({ $0 }) {
            let window = index / max(1, size)
            while windows.count <= window { windows.append([]) }
            windows[window].append(latency)
        }
        return windows.map { percentileMs($0.sorted(), p) }
    }
}

/// The `p` quantile (0…1) of sorted latencies, in milliseconds (nearest rank).
func percentileMs(_ sorted: [Duration], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return sorted[max(0, min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1))].timeInterval * 1000
}

/// Prints a result as pretty JSON or as its summary.
func emit(_ result: some Encodable, summary: String, json: Bool) throws {
    if json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        print(String(decoding: try encoder.encode(result), as: UTF8.self))
    } else {
        print(summary)
    }
}

extension BenchResult {
    /// A push benchmark's figures.
    init(load: LoadGenerator, elapsed: Duration, tally: Tally, payloadBytes: Int) {
        let sorted = tally.sorted
        self.init(
            pushes: load.count, failures: tally.failures.withLock { $0 }, seconds: elapsed.timeInterval,
            pushesPerSecond: Double(load.count) / elapsed.timeInterval, targetRate: load.rate, concurrency: load.rate > 0 ? nil : load.concurrency,
            payloadBytes: payloadBytes, p50Ms: percentileMs(sorted, 0.50), p90Ms: percentileMs(sorted, 0.90), p99Ms: percentileMs(sorted, 0.99),
            maxMs: (sorted.last ?? .zero).timeInterval * 1000, peakRSSMiB: ProcessMemory.peakResidentMiB())
    }
}
