import ArgumentParser
import Crypto
import Foundation
import RingRelayCore
import RingRelayKit
import RingRelayTesting
import RingRelayWire

extension BenchCommand {
    /// `ringrelay bench sealed`: the cost of one sealed invite on each side, in this process.
    struct Sealed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sealed", abstract: "Seal and open sealed call invites (HPKE, P-256) in this process: time per invite.",
            discussion: """
                The caller seals one box per callee device; the callee opens it, which includes looking the caller's \
                key up (in memory here, the key directory over HTTP in an app) and recording the invite in the \
                replay file. The replay file's share is measured apart on a second file. Build with -c release.
                """)

        @Option(help: "Invites to seal and open.") var count = 2000
        @Option(help: "Bytes of metadata inside each invite.") var metadataBytes = 256
        @Flag(help: "Print the result as JSON.") var json = false

        func run() async throws {
            let directory = try TemporaryDirectory(prefix: "ringrelay-bench-sealed")
            defer { directory.remove() }
            let caller = SealedCallIdentity(accountId: "acc_bench", identity: "alice", deviceId: "alice-phone", privateKey: .init())
            let callee = SealedCallIdentity(accountId: "acc_bench", identity: "bob", deviceId: "bob-phone", privateKey: .init())
            let address = SealedInviteAddress(accountId: "acc_bench", identity: "bob", bindingId: "bnd_bench")
            let callerKey = DeviceKeyResource(
                bindingId: "bnd_alice", deviceId: caller.deviceId, type: "apns_alert", publicKey: caller.publicKeyBase64, registeredAt: Date())
            // Every invite stays unexpired for the run: the stores must hold them all (a full store
            // refuses new invites rather than forget one).
            let opener = SealedInviteOpener(
                identity: callee, bindingIds: [address.bindingId], senderKeys: KeyDirectoryLookup { _ in [callerKey] },
                replayStore: InviteReplayStore(fileURL: URL(fileURLWithPath: directory.appending("opened.json")), capacity: count))
            let replayOnly = InviteReplayStore(fileURL: URL(fileURLWithPath: directory.appending("replay-only.json")), capacity: count)
            let metadata = JSONValue.object(["pad": .string(String(repeating: "x", count: metadataBytes))])

            let clock = ContinuousClock()
            var seal: [Duration] = []
            var open: [Duration] = []
            var replay: [Duration] = []
            var boxLength = 0
            for index in 0..<count {
                let callId = "call_bench\(String(format: "%021d", index))"
                let payload = SealedCallPayload(
                    inviteId: "bench-\(index)", callId: callId,
                    caller: .init(identity: "alice", deviceId: caller.deviceId, keyId: caller.keyId, displayName: "Alice"),
                    media: "audio", metadata: metadata, expiresAt: Date().addingTimeInterval(60))
                var box = ""
                seal.append(try clock.measure { box = try caller.seal(payload, to: callee.privateKey.publicKey, address: address) })
                boxLength = box.utf8.count
                open.append(try await clock.measure { _ = try await opener.open(box, callId: callId) })
                replay.append(
                    try clock.measure { _ = try replayOnly.recordFirstOpening(of: "replay-\(index)", expiresAt: payload.expiresAt, now: Date()) })
            }
            let result = SealedBenchResult(
                invites: count, boxCharacters: boxLength, seal: .init(seal), open: .init(open), replayFile: .init(replay))
            try emit(result, summary: result.summary, json: json)
        }
    }
}

/// What `ringrelay bench sealed` measured, in microseconds per invite.
struct SealedBenchResult: Codable {
    /// Mean and quantiles of one operation.
    struct Timing: Codable {
        var meanMicroseconds: Double
        var p50Microseconds: Double
        var p99Microseconds: Double

        init(_ samples: [Duration]) {
            let sorted = samples.sorted()
            meanMicroseconds = sorted.reduce(0) { $0 + $1.timeInterval } / Double(max(1, sorted.count)) * 1e6
            p50Microseconds = percentileMs(sorted, 0.5) * 1000
            p99Microseconds = percentileMs(sorted, 0.99) * 1000
        }

        var text: String {
            String(format: "mean %.0f µs, p50 %.0f µs, p99 %.0f µs", meanMicroseconds, p50Microseconds, p99Microseconds)
        }
    }

    var invites: Int
    var boxCharacters: Int
    var seal: Timing
    var open: Timing
    var replayFile: Timing

    var summary: String {
        """
        invites     \(invites), boxes of \(boxCharacters) base64 characters
        seal        \(seal.text) (one box)
        open        \(open.text) (decrypt both layers, look the caller's key up, record the invite)
        of which    \(replayFile.text) (the replay file alone: lock, read, write, rename)
        """
    }
}
