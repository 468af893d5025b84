import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import RingRelayTesting
import RingRelayWire
import RingRelayStore
import Testing

@testable import RingRelayServer

@Suite struct OpsTests {
    @Test func healthReadinessAndMetrics() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            #expect(try await client.send(.get, "/healthz").status == .ok)
            let ready = try await client.send(.get, "/readyz")
            #expect(ready.status == .ok)
            #expect(String(buffer: ready.body).contains(#""store":"ok""#))

            let key = try await client.createAccount("acme", admin: server.adminToken).apiKey
            _ = try await client.createBinding(#"{"identity":"bob","type":"fcm","token":"t1"}"#, token: key)
            _ = try await client.send(.get, "/v1/bindings/bnd_missing", token: key)

            let metrics = try await client.send(.get, "/metrics")
            #expect(metrics.headers[.contentType]?.hasPrefix("text/plain") == true)
            let text = String(buffer: metrics.body)
            #expect(text.contains(#"ringrelay_http_requests_total{route="/v1/bindings",method="POST",status="201"} 1"#))
            #expect(text.contains(#"ringrelay_http_requests_total{route="/v1/bindings/{bindingId}",method="GET",status="404"} 1"#))
            #expect(text.contains(#"ringrelay_bindings{type="fcm",status="active"} 1"#))
            #expect(text.contains(#"ringrelay_bindings{type="apns_voip",status="active"} 0"#))
            #expect(text.contains("ringrelay_http_request_duration_seconds_bucket"))
            // Raw ids never become label values.
            #expect(!text.contains("bnd_missing"))
        }
    }

    /// With `--metrics-token`, `/metrics` answers the token (and the admin) only; the token opens
    /// nothing else. Anonymous `/readyz` never names accounts.
    @Test func metricsTokenGuardsMetricsAndNothingElse() async throws {
        var server = try await TestServer.make()
        let metricsToken = "scrape-token-0123456789"
        server.configuration.metricsToken = metricsToken
        let adminToken = server.adminToken
        try await server.withClient { client in
            let key = try await client.createAccount("acme", admin: adminToken).apiKey
            let anonymous = try await client.send(.get, "/metrics")
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.errorCode == "missing_credentials")
            #expect(try await client.send(.get, "/metrics", token: key).status == .forbidden)
            #expect(try await client.send(.get, "/metrics", token: "not-the-metrics-token-0000").status == .unauthorized)
            let scraped = try await client.send(.get, "/metrics", token: metricsToken)
            #expect(scraped.status == .ok)
            #expect(String(buffer: scraped.body).contains("ringrelay_bindings"))
            #expect(try await client.send(.get, "/metrics", token: adminToken).status == .ok)
            // The scraper's token is not an admin, account or device credential.
            #expect(try await client.send(.get, "/v1/accounts", token: metricsToken).status == .forbidden)
            #expect(try await client.send(.get, "/v1/bindings", token: metricsToken).status == .forbidden)
            // Health checks stay open for load balancers.
            #expect(try await client.send(.get, "/healthz").status == .ok)
            #expect(try await client.send(.get, "/readyz").status == .ok)
        }
    }

    /// `GET /` says what the server is and links the API description and readiness, instead of a
    /// bare 404 (issue 19 item 14).
    @Test func rootPageSaysWhatThisIsAndLinksTheAPI() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            let page = try await client.send(.get, "/")
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(page.headers[.contentSecurityPolicy] == "default-src 'none'")
            let html = String(buffer: page.body)
            #expect(html.contains("<title>RingRelay</title>"))
            #expect(html.contains("incoming-call delivery service"))
            // Relative links, each to a route that answers; nothing loaded from elsewhere.
            let links = html.matches(of: /href="([^"]*)"/).map { String($0.1) }
            #expect(Set(links) == ["openapi.yaml", "readyz", "healthz"])
            for link in links {
                #expect(try await client.send(.get, "/" + link).status == .ok, "\(link)")
            }
            #expect(!html.contains("src=") && !html.contains("://") && !html.contains("<script") && !html.contains("<style"))
        }
    }

    @Test func readinessFailsWhenTheStoreIsGone() async throws {
        let server = try await TestServer.make()
        try await server.withClient { client in
            try await server.store.close()
            let ready = try await client.send(.get, "/readyz")
            #expect(ready.status == .serviceUnavailable)
            #expect(try await client.send(.get, "/healthz").status == .ok)
            // Re-open so the helper's final close has something to close.
            _ = ready
        }
    }
}
