import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import RingRelayCore
import RingRelayServer

extension BenchCommand {
    /// `ringrelay bench executor`: what a request's `await`s cost on the global executor `serve` installs.
    struct Executor: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "executor", abstract: "Time awaits on the global executor `serve` installs, and count the jobs they enqueue.",
            discussion: """
                Installs Swift concurrency's global executor on NIO's event loops as `serve` does (--executor generic), \
                or as NIO itself offers it (--executor nio), then makes --hops steps, each a call through three nonisolated \
                async layers (as a request's middlewares call one another). With `generic` none of them should go \
                through an event loop's queue; the report counts the jobs that did.
                """)

        enum Kind: String, ExpressibleByArgument, CaseIterable {
            case generic, nio
        }

        @Option(help: "Which global executor to install: generic (as serve does) or nio.") var executor: Kind = .generic
        @Option(help: "Steps to make.") var hops = 200_000
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            guard hops > 0 else { throw ValidationError("--hops must be positive.") }
        }

        func run() async throws {
            let installed =
                switch executor {
                case .generic: EventLoopGlobalExecutor.install()
                case .nio: NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
                }
            guard installed else { throw ValidationError("The global executor hook is taken: cannot install \(executor.rawValue).") }
            let hops = self.hops
            let (elapsed, enqueued, total) = await Task.detached {
                let before = EventLoopGlobalExecutor.jobsEnqueued
                let start = ContinuousClock.now
                var total = 0
                for index in 0..<hops {
                    total &+= await Self.step(index)
                }
                return (ContinuousClock.now - start, EventLoopGlobalExecutor.jobsEnqueued - before, total)
            }.value
            let result = ExecutorBenchResult(
                executor: executor.rawValue, hops: hops, nanosecondsPerHop: elapsed.timeInterval * 1e9 / Double(hops),
                jobsEnqueuedPerHop: executor == .generic ? Double(enqueued) / Double(hops) : nil, checksum: total)
            var summary = "executor     \(result.executor), \(hops) steps (three nonisolated async layers each)\n"
            summary += String(format: "time         %.0f ns a step", result.nanosecondsPerHop)
            if let perHop = result.jobsEnqueuedPerHop { summary += String(format: "\nenqueued     %.3f jobs a step", perHop) }
            try emit(result, summary: summary, json: json)
        }

        /// Three nonisolated async layers called through existentials, as a request's middlewares
        /// call one another: entering each asks the runtime for the generic executor.
        static let chain: any Layer = Middleware(next: Middleware(next: Middleware(next: Handler())))

        static func step(_ index: Int) async -> Int { await chain.respond(index) }
    }
}

struct ExecutorBenchResult: Codable {
    var executor: String
    var hops: Int
    var nanosecondsPerHop: Double
    /// Jobs the event loops ran per step (counted for `generic` only): 0 when awaits stay inline.
    var jobsEnqueuedPerHop: Double?
    /// Keeps the steps' work observable.
    var checksum: Int
}

/// One layer of `bench executor`'s chain.
protocol Layer: Sendable {
    func respond(_ value: Int) async -> Int
}

private struct Middleware: Layer {
    let next: any Layer
    func respond(_ value: Int) async -> Int { await next.respond(value &+ 1) &* 3 }
}

private struct Handler: Layer {
    func respond(_ value: Int) async -> Int { value &* 31 }
}
