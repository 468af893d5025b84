import Foundation
import NIOCore
import NIOSSL

/// Where a pool connects: host, port and the TLS context (trust roots, client certificate, ALPN `h2`).
public struct HTTP2Endpoint: Sendable {
    /// Host name or address.
    public var host: String
    /// TCP port.
    public var port: Int
    /// `:authority` of every request: the host, with the port unless it is 443.
    public var authority: String
    /// TLS for every connection; ALPN offers only `h2`.
    public var sslContext: NIOSSLContext
    /// The name sent as SNI and checked against the certificate; `nil` for an IP address (checked
    /// against the certificate's IP entries instead).
    public var serverName: String?

    /// Creates an endpoint from an `https://host[:port]` URL.
    ///
    /// - Parameter tls: the TLS configuration; its ALPN protocols are set to `h2` here.
    /// - Throws: ``InvalidURL`` when `url` has no host; NIOSSL's error when `tls` is unusable.
    public init(url: String, tls: TLSConfiguration) throws {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw InvalidURL(url: url)
        }
        var tls = tls
        tls.applicationProtocols = ["h2"]
        self.host = host
        self.port = components.port ?? 443
        self.authority = port == 443 ? host : "\(host):\(port)"
        self.sslContext = try NIOSSLContext(configuration: tls)
        self.serverName = (try? SocketAddress(ipAddress: host, port: 0)) == nil ? host : nil
    }

    /// The URL is not `https://host[:port]`.
    public struct InvalidURL: Error, CustomStringConvertible {
        /// The URL given.
        public var url: String
        public var description: String { "\(url) is not an https://host[:port] URL" }
    }
}
