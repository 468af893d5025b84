import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOFoundationEssentialsCompat
import Logging
import RingRelayTesting
import RingRelayStore
import Testing

@testable import RingRelayServer

@Suite struct OpenAPITests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `(METHOD, /path/{param})` pairs under `paths:` of the checked-in document.
    static func documentedOperations() throws -> Set<String> {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
        var operations = Set<String>()
        var inPaths = false
        var currentPath: String?
        let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options"]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" "), !line.isEmpty {
                inPaths = line.hasPrefix("paths:")
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   ") {
                currentPath = String(line.dropFirst(2).dropLast(line.hasSuffix(":") ? 1 : 0)).trimmingCharacters(in: CharacterSet(charactersIn: "'\""))
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let path = currentPath {
                let key = line.dropFirst(4).split(separator: ":").first.map(String.init) ?? ""
                if methods.contains(key) { operations.insert("\(key.uppercased()) \(path)") }
            }
        }
        return operations
    }

    /// `(METHOD, /path/{param})` pairs the router serves.
    static func routedOperations(_ router: Router<RingRelayRequestContext>) -> Set<String> {
        Set(
            router.routes.map { route in
                let path = route.path.description.split(separator: "/").map { segment in
                    segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
                }.joined(separator: "/")
                return "\(route.method.rawValue) /\(path)"
            })
    }

    @Test func specAndRoutesAgree() async throws {
        let server = try await TestServer.make()
        defer { server.directory.remove() }
        let services = try await AppServices.make(
            configuration: server.configuration, store: server.store, adminToken: server.adminToken, clock: server.clock,
            logger: TestLogging.logger("test"))
        let routed = Self.routedOperations(buildRouter(services: services))
        let documented = try Self.documentedOperations()
        #expect(routed.count >= 20)
        #expect(routed.subtracting(documented).isEmpty, "routes missing from docs/openapi.yaml: \(routed.subtracting(documented).sorted())")
        #expect(documented.subtracting(routed).isEmpty, "documented but not served: \(documented.subtracting(routed).sorted())")
        try await server.store.close()
    }

    @Test func everyDocumentedOperationAnswers() async throws {
        let documented = try Self.documentedOperations()
        let server = try await TestServer.make()
        try await server.withClient { client in
            for operation in documented.sorted() {
                let parts = operation.split(separator: " ", maxSplits: 1)
                let uri = parts[1].split(separator: "/").map { $0.hasPrefix("{") ? "x" : String($0) }.joined(separator: "/")
                let response = try await client.send(HTTPRequest.Method(String(parts[0]))!, "/" + uri)
                #expect(response.errorCode != "route_not_found", "\(operation)")
                #expect(response.status.code < 500, "\(operation)")
            }
        }
    }

    @Test func servedDocumentIsTheCheckedInOne() async throws {
        let server = try await TestServer.make()
        let checkedIn = try Data(contentsOf: Self.repositoryRoot.appendingPathComponent("docs/openapi.yaml"))
        try await server.withClient { client in
            let response = try await client.send(.get, "/openapi.yaml")
            #expect(response.status == .ok)
            #expect(Data(buffer: response.body) == checkedIn)
        }
    }
}
