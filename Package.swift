// swift-tools-version:6.1
import PackageDescription

/// Settings every target shares: Swift 6 language mode comes from the tools version;
/// these upcoming features keep existentials explicit and imports honest.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "ringrelay",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "ringrelay", targets: ["RingRelayCLI"]),
        .library(name: "RingRelayServer", targets: ["RingRelayServer"]),
        .library(name: "RingRelayWire", targets: ["RingRelayWire"]),
        .library(name: "RingRelayKit", targets: ["RingRelayKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .target(
            name: "RingRelayCore",
            // Wire (no dependencies of its own) for the protocol's names: the call rules plan
            // events by the wire's own CallEventType.
            // Crypto checks that a sealed-invite public key is a point on P-256.
            dependencies: [
                "RingRelayWire", .product(name: "Logging", package: "swift-log"), .product(name: "Crypto", package: "swift-crypto"),
                // The push metrics both push clients record (PushMetrics).
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RingRelayWire",
            swiftSettings: swiftSettings
        ),
        .target(
            // The client SDK: Foundation, the wire types and swift-crypto only, nothing server-side.
            name: "RingRelayKit",
            dependencies: ["RingRelayWire", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RingRelayStore",
            dependencies: [
                "RingRelayCore",
                // SQLiteNIO brings its vendored SQLite build, whose C module (VaporCSQLite)
                // SQLiteHandle uses directly to keep prepared statements; see that file.
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // The PostgreSQL engine behind the same store protocols, for several instances
            // sharing one database; RingRelayStore stays the embedded SQLite default.
            name: "RingRelayPostgres",
            dependencies: [
                "RingRelayCore",
                // The call rules' names (CallState and its kin) are the wire's.
                "RingRelayWire",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // The HTTP/2 client layer both push services share: connection pools that keep to the
            // server's stream limits and resend what the server refused unprocessed.
            name: "RingRelayHTTP2",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RingRelayAPNs",
            dependencies: [
                "RingRelayCore",
                "RingRelayHTTP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RingRelayFCM",
            dependencies: [
                "RingRelayCore",
                "RingRelayHTTP2",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RingRelayServer",
            dependencies: [
                "RingRelayAPNs",
                "RingRelayCore",
                "RingRelayFCM",
                "RingRelayWire",
                "RingRelayStore",
                "RingRelayPostgres",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: [.copy("Resources/openapi.yaml")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RingRelayTesting",
            dependencies: [
                "RingRelayCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "RingRelayCLI",
            dependencies: [
                "RingRelayAPNs",
                "RingRelayFCM",
                "RingRelayCore",
                "RingRelayKit",
                "RingRelayServer",
                "RingRelayTesting",
                "RingRelayWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                // NIOSSL's errors tell a failed TLS handshake apart (ConnectionProblem).
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["CommitStamp"]
        ),
        .plugin(
            // Stamps the git commit into the executable for `--version`; see the plugin's comment.
            name: "CommitStamp",
            capability: .buildTool(),
            exclude: ["commit-stamp.sh"]
        ),
        .testTarget(
            name: "RingRelayCoreTests",
            dependencies: ["RingRelayCore", "RingRelayWire", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RingRelayKitTests",
            dependencies: ["RingRelayKit", "RingRelayWire", "RingRelayTesting"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RingRelayAPNsTests",
            dependencies: [
                "RingRelayAPNs",
                "RingRelayCore",
                "RingRelayTesting",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RingRelayHTTP2Tests",
            dependencies: [
                "RingRelayHTTP2",
                "RingRelayTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RingRelayFCMTests",
            dependencies: [
                "RingRelayCore",
                "RingRelayFCM",
                "RingRelayTesting",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RingRelayTestingTests",
            dependencies: [
                "RingRelayTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RingRelayServerTests",
            dependencies: [
                "RingRelayAPNs",
                "RingRelayFCM",
                "RingRelayCLI",
                "RingRelayKit",
                "RingRelayServer",
                "RingRelayStore",
                "RingRelayPostgres",
                "RingRelayTesting",
                "RingRelayWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
    ]
)
