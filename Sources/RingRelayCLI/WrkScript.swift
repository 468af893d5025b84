import ArgumentParser
import Foundation

/// wrk (Debian's `wrk`) as a second process sending pre-signed webhooks, each once.
///
/// The Lua script reads a file of `path signature body` lines; thread `i` of `n` takes every
/// `n`th line from the `i`th and stops once each of its requests has been answered. A connection
/// that asks for a request after its thread's share is used up gets `GET /healthz`, which is not
/// counted (there are at most as many of those as connections, plus the one wrk asks for to check
/// the script before it starts).
enum WrkScript {
    static let text = """
        local threads = 0
        function setup(thread)
          thread:set("id", threads)
          threads = threads + 1
        end

        function init(args)
          local count = tonumber(args[2])
          requests = {}
          local n = 0
          for line in io.lines(args[1]) do
            if n % count == id then
              local path, signature, body = line:match("^(%S+) (%S+) (.+)$")
              requests[#requests + 1] = wrk.format("POST", path,
                { ["Content-Type"] = "application/json", ["X-Twilio-Signature"] = signature }, body)
            end
            n = n + 1
          end
          spare = wrk.format("GET", "/healthz")
          -- wrk calls the first thread's request() once before the run, to check it: that call
          -- must not use up a webhook.
          checking = id == 0
          sent = 0
          answered = 0
          failed = 0
        end

        function request()
          if checking then
            checking = false
            return spare
          end
          sent = sent + 1
          if sent > #requests then return spare end
          return requests[sent]
        end

        function response(status, headers, body)
          answered = answered + 1
          if answered <= #requests and status ~= 200 then failed = failed + 1 end
          if answered >= #requests then wrk.thread:stop() end
        end

        function done(summary, latency, requests)
          io.write(string.format("RESULT p50_us=%d p99_us=%d max_us=%d errors=%d\\n",
            latency:percentile(50), latency:percentile(99), latency.max,
            summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout + summary.errors.status))
        end
        """

    /// What a wrk run reported.
    struct Report {
        /// Socket errors, timeouts and answers other than 2xx/3xx, as wrk counts them.
        var errors: Int
        var p50Ms: Double
        var p99Ms: Double
        var maxMs: Double
    }

    /// A running wrk. Its main thread sleeps for `-d` whatever its threads do, so the caller
    /// decides when the work is done and calls ``finish()``.
    struct Running {
        let pid: pid_t
        let output: Task<String, Never>

        /// Whether wrk still runs (once it has exited, this reaps it).
        var isRunning: Bool {
            var status: Int32 = 0
            return waitpid(pid, &status, WNOHANG) == 0
        }

        /// Interrupts wrk (it then prints its summary) and reads what it reported.
        func finish() async throws -> Report {
            kill(pid, SIGINT)
            let text = await output.value
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
            guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("RESULT ") }) else {
                throw ValidationError("wrk failed: \(text)")
            }
            var values: [String: Int] = [:]
            for field in line.dropFirst("RESULT ".count).split(separator: " ") {
                let pair = field.split(separator: "=")
                if pair.count == 2, let value = Int(pair[1]) { values[String(pair[0])] = value }
            }
            return Report(
                errors: values["errors"] ?? 0, p50Ms: Double(values["p50_us"] ?? 0) / 1000, p99Ms: Double(values["p99_us"] ?? 0) / 1000,
                maxMs: Double(values["max_us"] ?? 0) / 1000)
        }
    }

    /// Starts wrk against `base` with the script and its arguments.
    ///
    /// Spawned directly rather than with `Process`: a child inherits the spawning thread's signal
    /// mask, and a Swift concurrency thread blocks nearly every signal, so wrk (which stops on a
    /// SIGINT handler) would never see the SIGINT that ends its run. Here the mask is emptied and
    /// every handler reset to the default.
    static func start(base: String, script: String, arguments: [String], threads: Int, connections: Int) throws -> Running {
        guard let binary = ["/usr/bin/wrk", "/usr/local/bin/wrk"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw ValidationError("wrk is not installed (apt-get install wrk).")
        }
        let argv =
            [binary, "-t", String(threads), "-c", String(max(connections, threads)), "-d", "600s", "--timeout", "30s", "-s", script, base, "--"]
            + arguments
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw ValidationError("Could not create a pipe for wrk.") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
        posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
        posix_spawn_file_actions_addclose(&actions, pipeEnds[1])
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, binary, &actions, &attributes, cArguments, environ)
        close(pipeEnds[1])
        guard status == 0 else {
            close(pipeEnds[0])
            throw ValidationError("Could not start wrk: \(String(cString: strerror(status)))")
        }
        let spawned = pid
        Interruption.onInterrupt { kill(spawned, SIGKILL) }
        let output = FileHandle(fileDescriptor: pipeEnds[0], closeOnDealloc: true)
        // Read as it comes, so a full pipe never blocks wrk; on a thread of its own, since the
        // read blocks until wrk exits.
        let reader = Task {
            await withCheckedContinuation { (read: CheckedContinuation<String, Never>) in
                Thread { read.resume(returning: String(decoding: (try? output.readToEnd()) ?? Data(), as: UTF8.self)) }.start()
            }
        }
        return Running(pid: spawned, output: reader)
    }
}
