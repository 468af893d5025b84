#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore
import NIOPosix
import Synchronization

/// Swift concurrency's global executor on NIO's event loops: a request then stays on one thread
/// from socket to handler to store to push and back, with no hop between two thread pools.
///
/// NIO offers this itself (`NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor`),
/// but runs each job *isolated to the event loop's serial executor*. Swift's runtime then sees
/// every call into a nonisolated `async` function (each middleware, each `await` into another
/// module) as a change of executor, and a serial executor that is not an actor cannot hand its
/// thread over: each such call goes back through the event loop's queue. `perf probe` counted
/// ~150 of those round trips per webhook. Here each job runs on the *generic* executor, as it
/// does on Swift's own pool, so those calls continue inline and actor hops take the thread over
/// when the actor is free; only a real wait re-enqueues.
public enum EventLoopGlobalExecutor {
    /// Installs the hook, once, before the process starts any task of its own (the runtime reads
    /// it without synchronisation). Returns whether it is in place: not when another hook is, or
    /// the runtime has none to set.
    @discardableResult
    public static func install() -> Bool {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else { return false }
        let slot = symbol.assumingMemoryBound(to: UnsafeRawPointer?.self)
        guard slot.pointee == nil else { return false }
        slot.pointee = unsafeBitCast(enqueueGlobalHook, to: UnsafeRawPointer.self)
        return true
    }

    /// Jobs the hook has put on the event loops since the process started (`bench executor` reads it).
    public static var jobsEnqueued: Int { enqueuedJobs.load(ordering: .relaxed) }

    fileprivate static let enqueuedJobs = Atomic<Int>(0)

    /// Runs `job` as Swift's own global executor does: on the generic executor, no isolation.
    static func runOnGenericExecutor(_ job: UnownedJob) {
        swiftJobRun(job, genericExecutor)
    }

    /// The runtime's generic executor: a null identity and no implementation.
    private static let genericExecutor: UnownedSerialExecutor = {
        precondition(MemoryLayout<UnownedSerialExecutor>.size == 2 * MemoryLayout<UInt>.size)
        return unsafeBitCast((UInt(0), UInt(0)), to: UnownedSerialExecutor.self)
    }()
}

/// The runtime entry point that runs a job on a given executor (the standard library declares it the same way).
@_silgen_name("swift_job_run")
private func swiftJobRun(_ job: UnownedJob, _ executor: UnownedSerialExecutor)

/// The hook the runtime calls for every global enqueue, `(job, original enqueue)`: the job goes to
/// an event loop (the current one when called on one, so a task woken on a loop stays there), to
/// run on the generic executor. Both arguments are pointers, passed alike by Swift's and C's
/// calling conventions.
private let enqueueGlobalHook: @convention(c) (UnsafeMutableRawPointer, UnsafeRawPointer?) -> Void = { job, _ in
    let job = unsafeBitCast(job, to: UnownedJob.self)
    EventLoopGlobalExecutor.enqueuedJobs.wrappingAdd(1, ordering: .relaxed)
    MultiThreadedEventLoopGroup.singleton.any().execute { EventLoopGlobalExecutor.runOnGenericExecutor(job) }
}
