import Hummingbird
import NIOCore

/// `GET /`: a small page saying what this server is, for whoever opens its address in a browser.
///
/// Plain HTML with no scripts, styles or external assets (the policy header forbids them all).
/// Links are relative, so they hold behind a proxy that serves RingRelay under a path prefix. The
/// probes are listed apart, as the operators' (`deploy/nginx/nginx.conf` answers them 403 from
/// outside; `DeploymentFilesTests` follows every link through it).
enum RootPage {
    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>RingRelay</title>
        </head>
        <body>
        <h1>RingRelay</h1>
        <p>A self-hosted incoming-call delivery service. When a call arrives from Twilio, Webex or its own calls API, \
        RingRelay rings every device of the callee: over a live WebSocket, an APNs VoIP push or an FCM message.</p>
        <p>This address serves its HTTP API. Apps and their backends call <code>/v1/…</code> with a bearer token; \
        there is nothing to click here.</p>
        <ul>
        <li><a href="openapi.yaml">openapi.yaml</a>: the API description (OpenAPI 3.1)</li>
        </ul>
        <p>For operators, from their own network: a reverse proxy in front keeps these from the internet \
        (the nginx configuration that ships with RingRelay refuses them).</p>
        <ul id="operators">
        <li><a href="readyz">readyz</a>: whether this instance is ready (store and push credentials)</li>
        <li><a href="healthz">healthz</a>: whether the process is up</li>
        </ul>
        </body>
        </html>

        """

    /// The page as a response.
    static func response() -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: "text/html; charset=utf-8",
                .contentSecurityPolicy: "default-src 'none'",
                .xContentTypeOptions: "nosniff",
            ],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}
