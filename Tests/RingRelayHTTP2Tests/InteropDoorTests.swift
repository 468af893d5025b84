import Foundation
import RingRelayTesting
import Testing

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
        #expect(InteropServer.canConnect(port: port), "\(kind): nothing accepts connections at \(door.url)")
        #expect(door.processedRequests().isEmpty)
        if kind == .chaos { door.cutConnections() }  // with nothing open: returns at once, the proxy stays up
        door.stop()
        #expect(!FileManager.default.fileExists(atPath: door.caFile), "\(kind): its files are still there after stop()")
    }
}
