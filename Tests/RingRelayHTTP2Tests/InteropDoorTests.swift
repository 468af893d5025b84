import Foundation
import RingRelayTesting
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Every ``InteropDoor`` starts, takes TCP connections at its URL, gives a CA file to trust, and
/// leaves no files behind once stopped: the doors' own setup, checked apart from the client tests
/// that go through them, so a door that no longer starts (a package missing, a configuration a new
/// Debian release refuses) fails here by name.
@Suite struct InteropDoorTests {
    @Test(arguments: InteropDoorKind.allCases)
    func doorStartsAndStops(kind: InteropDoorKind) async throws {
        let door = try await InteropDoor.start(kind, chaosSeed: kind == .chaos ? 7 : nil)
        let port = try #require(URLComponents(string: door.url)?.port, "\(door.url)")
        #expect(door.url == "https://127.0.0.1:\(port)")
        #expect(door.kind == kind)
        #expect(door.seed == (kind == .chaos ? 7 : nil))
        let certificate = try String(contentsOfFile: door.caFile, encoding: .utf8)
        #expect(certificate.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(Self.acceptsConnection(port: port), "\(kind): nothing accepts connections at \(door.url)")
        #expect(door.processedRequests().isEmpty)
        if kind == .chaos { door.cutConnections() }  // with nothing open: returns at once, the proxy stays up
        door.stop()
        #expect(!FileManager.default.fileExists(atPath: door.caFile), "\(kind): its files are still there after stop()")
    }

    /// Whether a TCP connection to 127.0.0.1:`port` is accepted (then closed at once).
    private static func acceptsConnection(port: Int) -> Bool {
        #if canImport(Glibc)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
