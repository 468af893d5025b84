import ArgumentParser
import Foundation
import Logging
import RingRelayTesting
import ServiceLifecycle
import UnixSignals

/// `ringrelay simulate`: local stand-ins for push services that cannot be reached from here.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a local simulator of a push service.",
        subcommands: [APNs.self])

    /// `ringrelay simulate apns`: an APNs provider API over HTTP/2 + TLS until SIGINT/SIGTERM.
    struct APNs: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "apns",
            abstract: "Run an APNs simulator (HTTP/2 over TLS, Apple's rules and error reasons).",
            discussion: """
                The simulator generates a self-signed certificate at start and writes it to --certificate-out; \
                give that file to `ringrelay serve --push-ca-file` so RingRelay trusts it. Each push it receives \
                is printed as one line: time, status, reason, push type, topic and the start of the device token.

                Example:
                  ringrelay simulate apns --key DEF123GHIJ:ABC123DEFG:./AuthKey_ABC123DEFG.p8 --topic com.example.app
                """)

        @Option(help: "Address to listen on.")
        var host = "127.0.0.1"

        @Option(help: "Port to listen on; 0 picks a free one (Apple's alternative APNs port is 2197).")
        var port = 2197

        @Option(help: "Where to write the simulator's certificate (PEM), the trust root for clients.")
        var certificateOut = "./apns-simulator.pem"

        @Option(
            name: .customLong("key"),
            help: ArgumentHelp(
                "A token-signing key as TEAMID:KEYID:/path/AuthKey.p8; repeatable.", valueName: "team:key:path"))
        var keys: [String] = []

        @Option(name: .customLong("topic"), help: "A bundle id the keys may push to; repeatable. Without --topic, any.")
        var topics: [String] = []

        func run() async throws {
            var configuration = APNsSimulator.Configuration()
            configuration.host = host
            configuration.port = port
            configuration.maximumRecordedPushes = 1000
            configuration.onPush = { push in say(Self.describe(push)) }

            let simulator: APNsSimulator
            do {
                simulator = try APNsSimulator(configuration: configuration)
                for key in keys {
                    let parts = key.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
                    guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
                        printError("--key must look like TEAMID:KEYID:/path/AuthKey.p8, got '\(key)'.")
                        throw ExitCode(64)  // EX_USAGE
                    }
                    let pem: String
                    do {
                        pem = try String(contentsOfFile: parts[2], encoding: .utf8)
                    } catch {
                        printError("Cannot read the key file \(parts[2]): \(error.localizedDescription)")
                        throw ExitCode(66)  // EX_NOINPUT
                    }
                    // Without --topic the keys may push to any bundle id.
                    try simulator.registerSigningKey(
                        teamID: parts[0], keyID: parts[1], p8PEM: pem, topics: topics.isEmpty ? nil : topics)
                }
                if keys.isEmpty {
                    simulator.acceptAnyProviderToken(topics: topics.isEmpty ? nil : topics)
                    printError(
                        "warning: no --key given; any well-formed ES256 provider token is accepted and signatures are NOT verified.")
                }
                try simulator.writeCertificate(toFile: certificateOut)
                try await simulator.start()
            } catch let exit as ExitCode {
                throw exit
            } catch {
                printError("ringrelay simulate apns failed: \(error)")
                throw ExitCode.failure
            }

            say("APNs simulator listening on \(simulator.url) (certificate: \(certificateOut))")
            var logger = Logger(label: "ringrelay.simulate", factory: { StreamLogHandler.standardError(label: $0) })
            logger.logLevel = .warning
            let group = ServiceGroup(
                configuration: .init(
                    services: [SimulatorService(simulator: simulator)],
                    gracefulShutdownSignals: [.sigterm, .sigint],
                    logger: logger))
            do {
                try await group.run()
            } catch {
                printError("ringrelay simulate apns failed: \(error)")
                throw ExitCode.failure
            }
        }

        /// One line per push: time, status, reason, push type, topic, token prefix.
        static func describe(_ push: APNsSimulator.ReceivedPush) -> String {
            let time = push.receivedAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
            let status = push.status == 0 ? "---" : String(push.status)
            let token = push.deviceToken.isEmpty ? "(no token)" : String(push.deviceToken.prefix(8)) + "…"
            return [
                time, status, push.reason ?? "-", push.headers["apns-push-type"] ?? "-",
                push.headers["apns-topic"] ?? "-", token,
            ].joined(separator: " ")
        }
    }
}

/// Keeps the simulator up until a shutdown signal, then closes it.
struct SimulatorService: Service {
    let simulator: APNsSimulator

    func run() async throws {
        try? await gracefulShutdown()
        try await simulator.shutdown()
    }
}
