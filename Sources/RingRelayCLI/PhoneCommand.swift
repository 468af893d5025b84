import ArgumentParser
import Foundation
import NIOHTTP1
import RingRelayKit
import RingRelayWire
import UnixSignals

/// `ringrelay phone`: a terminal softphone on RingRelayKit, to try RingRelay without an iPhone.
///
/// It connects as one device of one identity, shows incoming calls and lets the user answer,
/// reject, hang up, hold, swap and place calls from the keyboard. The script options answer,
/// reject, call and hang up by themselves, and `--json` prints one event per line, for demos
/// and tests. Several callees make a ring group (`c bob carol`, `--call bob --call carol`): the
/// first to answer takes the call, or with `all` / `--ring-all` each joins, and the phone prints
/// who joined, declined or left. With `--key-file` it places (`--sealed`, `c <identity> sealed`) and answers sealed
/// calls, whose caller, name and media only the two phones read.
struct PhoneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "phone",
        abstract: "A terminal softphone: rings, answers and places calls as one device.",
        discussion: """
            Sign in with a device access token (--token), or let the phone mint its own tokens with an \
            account API key (--api-key with --identity, and optionally --device-id).

            Commands, one a line: a answer, r reject, h hang up, o hold/resume, s swap, \
            c <identity> call (c <identity> sealed: a sealed call), l list calls, q quit. The end \
            of input (Ctrl-D) quits too; run in the background or from a script with --no-input.

            Ring groups: c bob carol dave rings all three at once and the first to answer takes \
            the call; c bob carol dave all lets each of them join as they answer (--ring-all makes \
            that the default). The phone prints each callee's change: carol joined, dave \
            declined, bob left.

            Sealed calls: --key-file names this phone's P-256 key, made (mode 0600) on first use \
            and reused after; the phone registers its public half so callers can seal to it, and \
            keeps the invites it opened and the keys it sealed to in files beside it.

            Durations are written like 500ms, 2s or 1m.
            """)

    @Option(help: "Server URL. [env: RINGRELAY_URL] (default: http://127.0.0.1:8080)")
    var server: String?

    @Option(help: "A device access token (POST /v1/access-tokens). [env: RINGRELAY_DEVICE_TOKEN]")
    var token: String?

    @Option(help: "An account API key: the phone mints its own device access tokens with it. [env: RINGRELAY_TOKEN]")
    var apiKey: String?

    @Option(help: "The identity to ring as (with --api-key).")
    var identity: String?

    @Option(help: "This device's id (with --api-key; default: a random phone-… id).")
    var deviceId: String?

    @Option(help: ArgumentHelp("Answer incoming calls after this delay, e.g. 500ms.", valueName: "duration"))
    var autoAnswer: PhoneDuration?

    @Flag(help: "Reject incoming calls at once.")
    var autoReject = false

    @Option(help: ArgumentHelp("Call this identity as soon as the phone is connected; repeat for a ring group.", valueName: "identity"))
    var call: [String] = []

    @Flag(help: "Let every callee of a ring group (--call given twice or more, or 'c' with several) join, not only the first to answer.")
    var ringAll = false

    @Flag(help: "Make --call and 'c' calls video calls.")
    var video = false

    @Option(help: ArgumentHelp("The name callees see; in a sealed call, only inside the box.", valueName: "name"))
    var displayName: String?

    @Option(
        help: ArgumentHelp(
            "This phone's P-256 key for sealed calls, created (mode 0600) when missing. [env: RINGRELAY_PHONE_KEY_FILE]", valueName: "path"))
    var keyFile: String?

    @Flag(help: "Make --call and 'c' calls sealed (needs --key-file).")
    var sealed = false

    @Option(help: ArgumentHelp("Hang up every call this long after it connected, e.g. 2s.", valueName: "duration"))
    var hangupAfter: PhoneDuration?

    @Option(help: ArgumentHelp("Quit this long after start, e.g. 30s.", valueName: "duration"))
    var exitAfter: PhoneDuration?

    @Flag(help: "Print one JSON object per event, one a line, instead of text; no prompt.")
    var json = false

    @Flag(help: "Read no commands from standard input, for scripts and background jobs: run until SIGINT, SIGTERM or --exit-after.")
    var noInput = false

    func validate() throws {
        if autoAnswer != nil && autoReject {
            throw ValidationError("Pass --auto-answer or --auto-reject, not both.")
        }
        if token != nil && (apiKey != nil || identity != nil) {
            throw ValidationError("Pass either --token, or --api-key with --identity, not both.")
        }
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let keyFilePath = keyFile ?? environment["RINGRELAY_PHONE_KEY_FILE"]
        if sealed && keyFilePath == nil {
            throw ValidationError("--sealed needs --key-file (or RINGRELAY_PHONE_KEY_FILE): the phone's key for sealed calls.")
        }
        let base = server ?? environment["RINGRELAY_URL"] ?? "http://127.0.0.1:8080"
        guard let serverURL = URL(string: base), serverURL.scheme == "http" || serverURL.scheme == "https", serverURL.host != nil else {
            throw ValidationError("--server must be an http(s) URL, got '\(base)'.")
        }
        let signIn = try signIn(serverURL: serverURL, environment: environment)
        let (quit, quitting) = await quitSignals()
        let output = PhoneOutput(json: json, readerGone: { quitting.yield("output closed") })
        let script = PhoneScript(
            autoAnswer: autoAnswer?.duration, autoReject: autoReject, call: call, ringMode: ringAll ? .all : .first,
            hangupAfter: hangupAfter?.duration,
            media: video ? .video : .audio, displayName: displayName, sealed: sealed)
        let phone: Softphone
        do {
            try await signIn.check()
            let sealedKey: PhoneSealedKey? =
                if let keyFilePath { try await PhoneSealedKey(file: try PhoneKeyFile.loadOrCreate(at: keyFilePath), signIn: signIn) } else { nil }
            phone = Softphone(serverURL: serverURL, signIn: signIn, script: script, output: output, sealedKey: sealedKey)
            try await phone.registerSealedKey()
        } catch {
            printError("ringrelay phone: \(error)")
            throw ExitCode.failure
        }
        await phone.run(until: quit, readingInput: !noInput)
    }

    /// How the phone gets its device access tokens, from the options and the environment.
    private func signIn(serverURL: URL, environment: [String: String]) throws -> PhoneSignIn {
        if let token = token ?? (identity == nil ? environment["RINGRELAY_DEVICE_TOKEN"] : nil) {
            return .token(token, deviceId: deviceId ?? PhoneTokenClaims(token: token)?.did)
        }
        guard let identity else {
            throw ValidationError("Pass --token, or --api-key with --identity.")
        }
        guard let apiKey = apiKey ?? environment["RINGRELAY_TOKEN"] else {
            throw ValidationError("--identity needs --api-key (or RINGRELAY_TOKEN): the account key that mints device tokens.")
        }
        let device = deviceId ?? "phone-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let base = serverURL.absoluteString.hasSuffix("/") ? String(serverURL.absoluteString.dropLast()) : serverURL.absoluteString
        return .apiKey(APIClient(baseURL: base, token: apiKey), identity: identity, deviceId: device)
    }

    /// What ends the phone besides `q`: SIGINT, SIGTERM, and --exit-after; the continuation takes
    /// other reasons (standard output closed).
    private func quitSignals() async -> (AsyncStream<String>, AsyncStream<String>.Continuation) {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self)
        let exitAfter = exitAfter?.duration
        // Trapped from here on: a signal no longer kills the process, it quits the phone.
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        Task {
            for await signal in signals {
                continuation.yield("signal \(signal)")
            }
        }
        if let exitAfter {
            Task {
                try? await Task.sleep(for: exitAfter)
                continuation.yield("exit-after")
            }
        }
        return (stream, continuation)
    }
}

/// How the phone signs in: a fixed device access token, or tokens it mints with an account key.
enum PhoneSignIn: Sendable {
    /// A device access token given on the command line.
    case token(String, deviceId: String?)
    /// An account API key that mints tokens for `identity` on `deviceId`.
    case apiKey(APIClient, identity: String, deviceId: String)

    /// The device id, when known before connecting.
    var deviceId: String? {
        switch self {
        case .token(_, let deviceId): deviceId
        case .apiKey(_, _, let deviceId): deviceId
        }
    }

    /// Fetches a device access token: the SDK's access-token provider.
    func accessToken() async throws -> String {
        switch self {
        case .token(let token, _):
            return token
        case .apiKey(let client, let identity, let deviceId):
            let request = AccessTokenRequest(identity: identity, deviceId: deviceId)
            return try await client.send(.POST, "/v1/access-tokens", body: request, as: AccessTokenResponse.self).0.token
        }
    }

    /// Fails early, with the server's message, when an account key cannot mint tokens.
    func check() async throws {
        if case .apiKey = self { _ = try await accessToken() }
    }
}

/// The claims of a RingRelay access token (a JWT), read without verifying it: the phone only
/// needs to know which account, identity and device it is.
struct PhoneTokenClaims: Decodable, Sendable {
    /// The account (`acc_…`).
    var acc: String
    /// The identity.
    var sub: String
    /// The device id.
    var did: String

    /// The claims of `token`, or `nil` when it is not a JWT with them.
    init?(token: String) {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let payload = Data(base64Encoded: base64), let claims = try? JSONDecoder().decode(Self.self, from: payload) else { return nil }
        self = claims
    }
}

/// A duration option: `500ms`, `2s`, `1.5s`, `1m`; a bare number is seconds.
struct PhoneDuration: ExpressibleByArgument, Sendable {
    /// The parsed duration.
    var duration: Duration

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces).lowercased()
        let units: [(suffix: String, seconds: Double)] = [("ms", 0.001), ("s", 1), ("m", 60)]
        let unit = units.first { text.hasSuffix($0.suffix) } ?? ("", 1)
        guard let value = Double(text.dropLast(unit.suffix.count)), value >= 0, value.isFinite else { return nil }
        duration = .milliseconds(Int64((value * unit.seconds * 1000).rounded()))
    }
}
