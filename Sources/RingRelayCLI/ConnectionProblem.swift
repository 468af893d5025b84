import AsyncHTTPClient
import Foundation
import HummingbirdWSClient
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Why talking to the server failed, in plain words, from what the HTTP or WebSocket client
/// threw: the CLI's verbs and the phone say it once, without the layers of NIO's wrapping.
///
/// The kinds need different fixes, so they are told apart: nothing listening (start the server,
/// fix the URL), TLS failing (the URL's scheme, or a certificate), a server that hangs up or
/// does not answer, and something that is not an HTTP server at all.
enum ConnectionProblem: Equatable, Sendable {
    /// No connection: refused, no route, a host name that does not resolve, a connect timeout.
    case unreachable(String)
    /// The TLS handshake failed: not a TLS server, a certificate not trusted here, ….
    case tls(String)
    /// The server closed the connection without answering.
    case dropped
    /// Connected, but no answer in time.
    case timedOut
    /// The answer was not HTTP (a TLS server asked in plain HTTP, another protocol).
    case notHTTP
    /// The server refused the WebSocket upgrade of the live connection.
    case upgradeRefused
    /// Anything else, as the client describes it.
    case other(String)

    /// The problem behind `error`.
    init(_ error: any Error) {
        switch error {
        case let error as NIOConnectionError:
            if error.dnsAError != nil || error.dnsAAAAError != nil {
                self = .unreachable("the host name does not resolve")
            } else if let first = error.connectionErrors.first {
                self = Self(first.error)
            } else {
                self = .unreachable("no address to connect to")
            }
        case let error as IOError:
            let reason = String(cString: strerror(error.errnoCode)).lowercased()
            self = [ECONNRESET, EPIPE].contains(error.errnoCode) ? .dropped : .unreachable(reason)
        case ChannelError.connectTimeout:
            self = .unreachable("timed out connecting")
        case ChannelError.eof, ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed:
            self = .dropped
        case let error as HTTPClientError:
            switch error {
            case .remoteConnectionClosed: self = .dropped
            case .connectTimeout: self = .unreachable("timed out connecting")
            case .readTimeout, .deadlineExceeded: self = .timedOut
            case .tlsHandshakeTimeout: self = .tls("the handshake timed out")
            default: self = .other("\(error)")
            }
        case let error as NIOSSLError:
            switch error {
            case .handshakeFailed(.sslError(let stack)), .handshakeFailed(.unknownError(let stack)):
                self = .tls(Self.plainTLSReason(stack))
            case .uncleanShutdown:
                self = .dropped
            default:
                self = .tls("\(error)")
            }
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            self = .tls("its certificate is for another host name")
        case is HTTPParserError:
            self = .notHTTP
        case LiveTransportError.closedBeforeOpening:
            self = .dropped
        case LiveTransportError.openTimedOut:
            self = .timedOut
        case let error as WebSocketClientError where error == .webSocketUpgradeFailed:
            self = .upgradeRefused
        default:
            self = .other("\(error)")
        }
    }

    /// The problem as one sentence about `server`, with what to check where there is something
    /// to say.
    func sentence(server: String) -> String {
        switch self {
        case .unreachable(let reason):
            "Cannot reach the server at \(server) (\(reason)). Is 'ringrelay serve' running there? Set --server or RINGRELAY_URL."
        case .tls(let reason):
            "The TLS handshake with \(server) failed (\(reason))."
        case .dropped:
            "The server at \(server) closed the connection without answering."
        case .timedOut:
            "The server at \(server) did not answer in time."
        case .notHTTP:
            "The server at \(server) did not answer in HTTP. If it speaks TLS, use https://."
        case .upgradeRefused:
            "The server at \(server) refused the live connection. Is the device token valid and unexpired?"
        case .other(let description):
            "Talking to the server at \(server) failed: \(description)"
        }
    }

    /// BoringSSL's reason, e.g. `error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER
    /// at …`, in words; the two a user meets most say what they mean.
    private static func plainTLSReason(_ stack: NIOBoringSSLErrorStack) -> String {
        let reasons = stack.compactMap { error in
            error.description.firstMatch(of: /:([A-Z0-9_]+)\s+at\s/).map { String($0.output.1) }
        }
        switch reasons.first {
        case "WRONG_VERSION_NUMBER"?: return "the server does not speak TLS there; for a plain server use http://"
        case "CERTIFICATE_VERIFY_FAILED"?: return "its certificate is not trusted here"
        case let reason?: return reason.replacingOccurrences(of: "_", with: " ").lowercased()
        case nil: return "handshake failed"
        }
    }
}
