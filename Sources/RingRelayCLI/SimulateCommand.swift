import ArgumentParser
import Foundation
import Logging
import RingRelayCore
import RingRelayTesting
import ServiceLifecycle
import UnixSignals

/// `ringrelay simulate`: local stand-ins for push services that cannot be reached from here.
struct SimulateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulate",
        abstract: "Run a local simulator of a push service.",
        subcommands: [APNs.self, FCM.self])

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

extension SimulateCommand {
    /// `ringrelay simulate fcm`: FCM HTTP v1 and Google's OAuth token endpoint over TLS until SIGINT/SIGTERM.
    struct FCM: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fcm",
            abstract: "Run an FCM simulator (HTTP v1 send and OAuth token endpoint over TLS, Google's rules and errors).",
            discussion: """
                The simulator generates a self-signed certificate at start and writes it to --certificate-out; \
                give that file to `ringrelay serve --push-ca-file` so RingRelay trusts it, and the simulator's URL \
                to `--fcm-endpoint`. It also writes a new service account (real RSA key) to --service-account-out, \
                whose token_uri points at the simulator: upload it with PUT /v1/credentials/fcm. Each message it \
                receives is printed as one line: time, status, error code, project, the start of the token and \
                the data size; each token request as a line starting with "oauth".

                Example:
                  ringrelay simulate fcm --port 8443 --certificate-out fcm-simulator.pem --service-account-out service-account.json
                """)

        @Option(help: "Address to listen on.")
        var host = "127.0.0.1"

        @Option(help: "Port to listen on; 0 picks a free one.")
        var port = 8443

        @Option(help: "Where to write the simulator's certificate (PEM), the trust root for clients.")
        var certificateOut = "./fcm-simulator.pem"

        @Option(help: "Where to write a new service account JSON whose token_uri points at the simulator.")
        var serviceAccountOut = "./fcm-service-account.json"

        @Option(help: "The Firebase project id of the new service account.")
        var projectId = "ringrelay-simulator"

        @Option(
            name: .customLong("service-account"),
            help: ArgumentHelp("An existing service account JSON file to accept as well; repeatable.", valueName: "path"))
        var serviceAccounts: [String] = []

        func run() async throws {
            var configuration = FCMSimulator.Configuration()
            configuration.host = host
            configuration.port = port
            configuration.maximumRecordedMessages = 1000
            configuration.onMessage = { message in say(Self.describe(message)) }
            configuration.onTokenRequest = { request in say(Self.describe(request)) }

            let simulator: FCMSimulator
            do {
                simulator = try FCMSimulator(configuration: configuration)
                for path in serviceAccounts {
                    let object: [String: String]
                    do {
                        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
                        object = (json as? [String: Any] ?? [:]).compactMapValues { $0 as? String }
                    } catch {
                        printError("Cannot read the service account \(path): \(error.localizedDescription)")
                        throw ExitCode(66)  // EX_NOINPUT
                    }
                    do {
                        try simulator.registerServiceAccount(json: object)
                    } catch {
                        printError("\(path): \(error)")
                        throw ExitCode(65)  // EX_DATAERR
                    }
                }
                try simulator.writeCertificate(toFile: certificateOut)
                try await simulator.start()
                try simulator.writeServiceAccount(toFile: serviceAccountOut, projectID: projectId)
            } catch let exit as ExitCode {
                throw exit
            } catch {
                printError("ringrelay simulate fcm failed: \(error)")
                throw ExitCode.failure
            }

            say(
                "FCM simulator listening on \(simulator.url) (certificate: \(certificateOut), service account: \(serviceAccountOut), project: \(projectId))"
            )
            var logger = Logger(label: "ringrelay.simulate", factory: { StreamLogHandler.standardError(label: $0) })
            logger.logLevel = .warning
            let group = ServiceGroup(
                configuration: .init(
                    services: [FCMSimulatorService(simulator: simulator)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
            do {
                try await group.run()
            } catch {
                printError("ringrelay simulate fcm failed: \(error)")
                throw ExitCode.failure
            }
        }

        /// One line per message: time, status, error code, project, token prefix, data keys and size.
        static func describe(_ message: FCMSimulator.ReceivedMessage) -> String {
            let time = message.receivedAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
            let status = message.status == 0 ? "---" : String(message.status)
            let token = message.registrationToken.isEmpty ? "(no token)" : String(message.registrationToken.prefix(12)) + "…"
            let size = message.data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            return [
                time, status, message.errorCode ?? "-", message.projectID, token, message.androidPriority ?? "-", message.androidTTL ?? "-",
                "data \(message.data.keys.sorted().joined(separator: ",")) (\(size) bytes)",
            ].joined(separator: " ")
        }

        /// One line per token request: time, `oauth`, status, error, client e-mail.
        static func describe(_ request: FCMSimulator.TokenRequest) -> String {
            let time = request.receivedAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
            let status = request.status == 0 ? "---" : String(request.status)
            return [time, "oauth", status, request.error ?? "token issued", request.clientEmail ?? "-"].joined(separator: " ")
        }
    }
}

/// Keeps the FCM simulator up until a shutdown signal, then closes it.
struct FCMSimulatorService: Service, DescribedByNameOnly {
    let simulator: FCMSimulator

    func run() async throws {
        try? await gracefulShutdown()
        try await simulator.shutdown()
    }
}

/// Keeps the simulator up until a shutdown signal, then closes it.
struct SimulatorService: Service, DescribedByNameOnly {
    let simulator: APNsSimulator

    func run() async throws {
        try? await gracefulShutdown()
        try await simulator.shutdown()
    }
}
