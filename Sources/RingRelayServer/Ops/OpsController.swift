import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus
import RingRelayCore

/// The root page, liveness, readiness, metrics and the API description. No credentials needed, except for
/// `/metrics` when `--metrics-token` is set.
struct OpsController {
    let store: any DataStore
    /// Credential problems the push services reported, shown in `/readyz`.
    let faults: ConfigurationFaults
    let metrics: ServerMetrics
    /// `--metrics-token`: when set, `/metrics` needs it (or the admin token).
    let metricsToken: String?

    /// `GET /readyz` answer.
    struct Readiness: Codable, Sendable {
        var status: String
        var checks: [String: String]
        /// Credential problems the push services reported, per account; empty when none.
        var credentialFaults: [Fault]?
    }

    /// One account's rejected credentials.
    struct Fault: Codable, Sendable {
        /// Shown to the admin token only: anyone can read `/readyz`, and account ids are not theirs.
        var accountId: String?
        var channel: String
        var reason: String
        var since: Date
    }

    func register(on router: Router<RingRelayRequestContext>) {
        router.get("/") { _, _ in RootPage.response() }
        router.get("/healthz") { _, _ in JSONResponse(Readiness(status: "ok", checks: [:], credentialFaults: nil)) }
        router.get("/readyz") { _, context in
            let isAdmin = context.principal == .admin
            do {
                try await store.ping()
                // One tenant's bad key must not take the instance out of the load balancer: faults
                // are reported here, the status stays 200.
                let faults = faults.all.map {
                    Fault(accountId: isAdmin ? $0.accountID : nil, channel: $0.channel.rawValue, reason: $0.reason, since: $0.since)
                }
                let push = faults.isEmpty ? "ok" : "\(faults.count) account credential fault(s)"
                return JSONResponse(.ok, Readiness(status: "ready", checks: ["store": "ok", "push": push], credentialFaults: faults))
            } catch {
                context.logger.warning("store not reachable", metadata: ["error.cause": .string("\(error)")])
                return JSONResponse(
                    .serviceUnavailable, Readiness(status: "unavailable", checks: ["store": "unreachable"], credentialFaults: nil))
            }
        }
        router.get("/metrics") { _, context in
            if metricsToken != nil {
                switch context.principal {
                case .metrics, .admin: break
                case nil: throw RingRelayError(.unauthenticated, code: .missingCredentials, "/metrics needs 'Authorization: Bearer <metrics token>'.")
                case .account, .device: throw RingRelayError.forbidden("/metrics needs the metrics token or the admin token.")
                }
            }
            // Counters the store keeps: a few rows, whatever the number of bindings.
            metrics.recordBindingCounts(try await store.bindingCounts())
            var buffer: [UInt8] = []
            metrics.registry.emit(into: &buffer)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
        }
        router.get("/openapi.yaml") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/yaml; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: try OpenAPIDocument.bytes())))
        }
    }
}

/// The checked-in `docs/openapi.yaml`, bundled as a resource.
enum OpenAPIDocument {
    /// The document's bytes.
    static func bytes() throws -> [UInt8] {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else {
            throw RingRelayError(.internal, code: .internalError, "The OpenAPI document is missing from this build.")
        }
        return Array(try Data(contentsOf: url))
    }
}
