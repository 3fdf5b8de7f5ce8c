// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .treatAllWarnings(as: .error),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// The web checkout's templates and assets, each compiled into the binary.
let checkoutTemplates = [
    "layout", "session", "sign-in", "sign-in-form", "outcome", "paid", "summary", "verification", "reference", "status",
]
let checkoutFiles =
    checkoutTemplates.map { "Templates/\($0).mustache" }
    + ["Assets/checkout.css", "Assets/checkout.js", "Assets/icon.svg"]

let package = Package(
    name: "gotchu",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gotchu", targets: ["gotchu"]),
        .executable(name: "gotchu-kiosk", targets: ["gotchu-kiosk"]),
        .library(name: "GotchuCore", targets: ["GotchuCore"]),
        .library(name: "GotchuReceipts", targets: ["GotchuReceipts"]),
        .library(name: "GotchuAPI", targets: ["GotchuAPI"]),
        .library(name: "GotchuLedgerServer", targets: ["GotchuLedgerServer"]),
        .library(name: "GotchuWebhooks", targets: ["GotchuWebhooks"]),
        .library(name: "GotchuOIDC", targets: ["GotchuOIDC"]),
        .library(name: "GotchuLedgerStores", targets: ["GotchuLedgerStores"]),
        .library(name: "GotchuLedgerClient", targets: ["GotchuLedgerClient"]),
        .library(name: "GotchuDBus", targets: ["GotchuDBus"]),
        .library(name: "GotchuBlueZ", targets: ["GotchuBlueZ"]),
        .library(name: "GotchuSimulatedRadio", targets: ["GotchuSimulatedRadio"]),
        .library(name: "GotchuPeer", targets: ["GotchuPeer"]),
        .library(name: "GotchuKioskClient", targets: ["GotchuKioskClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.25.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", "4.1.0"..<"6.0.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
    ],
    targets: [
        // Sans-IO domain: EIDs, amounts, service-data codec, radio protocol, proximity selection.
        .target(name: "GotchuCore", swiftSettings: swiftSettings),
        // Signed receipts: the ledger's statement that money moved, their canonical bytes and JSON, signing and
        // verification, once for the ledger, its server and every client.
        .target(
            name: "GotchuReceipts",
            dependencies: ["GotchuCore", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // Codable wire types and problem types shared by server and client.
        .target(
            name: "GotchuAPI",
            dependencies: ["GotchuCore", "GotchuReceipts"],
            swiftSettings: swiftSettings
        ),
        // The ledger's rules, once: operations, domain errors and the backend protocol; no HTTP, no database.
        // Passwords are bcrypt hashes and refresh tokens SHA-256 digests, made and checked here once for every store.
        .target(
            name: "GotchuLedger",
            dependencies: [
                "GotchuCore", "GotchuReceipts",
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The ledger backends: SQL, schema and migrations of one database each.
        .target(
            name: "GotchuLedgerSQLite",
            dependencies: [
                "GotchuLedger", "GotchuCore", "GotchuReceipts", .product(name: "GRDB", package: "GRDB.swift"),
                // Rows decoded by position, straight from the stepped statement.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "GotchuLedgerPostgres",
            dependencies: [
                "GotchuLedger", "GotchuCore", "GotchuReceipts",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Opens a ledger by name (an SQLite path or a postgres:// URL): one way for the server and the operator's
        // commands.
        .target(
            name: "GotchuLedgerStores",
            dependencies: [
                "GotchuLedger", "GotchuLedgerSQLite", "GotchuLedgerPostgres",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The ledger's values as the API spells them (one mapping for the routes, the pages and the webhooks), and
        // the checks an e-mail address passes where it enters.
        .target(
            name: "GotchuLedgerAPI",
            dependencies: ["GotchuCore", "GotchuAPI", "GotchuReceipts", "GotchuLedger"],
            swiftSettings: swiftSettings
        ),
        // Webhook delivery: the worker over the store's outbox, the client that connects only to addresses it
        // checked, the address policy and the signatures.
        .target(
            name: "GotchuWebhooks",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuLedger", "GotchuLedgerAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Sign-in through an external OpenID Connect issuer: its access tokens verified against its keys, and the
        // authorization-code flow (PKCE) that signs browsers in.
        .target(
            name: "GotchuOIDC",
            dependencies: [
                "GotchuCore", "GotchuReceipts",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The web checkout's pages: their templates, style, script and icon, the browser session's cookie, the
        // checkout links and the session's event stream. Templates and assets are compiled into the binary, so an
        // installed server needs no resource bundle.
        .target(
            name: "GotchuCheckout",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuReceipts", "GotchuLedger", "GotchuLedgerAPI",
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                // Checkout links: a session id through one AES block.
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            resources: checkoutFiles.map { .embedInCode($0) },
            swiftSettings: swiftSettings
        ),
        // The ledger's HTTP edge: routes, problem+json, tokens, limits.
        .target(
            name: "GotchuLedgerServer",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuReceipts", "GotchuLedger", "GotchuSystemd", "GotchuQR",
                "GotchuLedgerAPI", "GotchuWebhooks", "GotchuOIDC", "GotchuCheckout", "GotchuLedgerStores",
                "GotchuLogging",
                // PrivateFile: the generated development secret is written as the client writes its tokens.
                "GotchuLedgerClient",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdAuth", package: "hummingbird-auth"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                "GotchuSettings",
            ],
            // The API contract, compiled into the binary so an installed server needs no resource bundle.
            resources: [.embedInCode("openapi.yaml")],
            swiftSettings: swiftSettings
        ),
        // URLSession, or AsyncHTTPClient when the ledger's certificate comes from a private CA (Linux's URLSession
        // cannot be given one).
        .target(
            name: "GotchuLedgerClient",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuReceipts",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // libdbus-1, imported only by GotchuDBus.
        .systemLibrary(name: "CGotchuDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .target(
            name: "GotchuDBus",
            dependencies: ["CGotchuDBus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "GotchuBlueZ",
            dependencies: ["GotchuCore", "GotchuDBus", .product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        .target(name: "GotchuSimulatedRadio", dependencies: ["GotchuCore"], swiftSettings: swiftSettings),
        .target(
            name: "GotchuPeer",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuReceipts", "GotchuLedgerClient",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // systemd's notification protocol (readiness, status, watchdog) without libsystemd.
        .target(
            name: "GotchuSystemd",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The programs' log formats: swift-log's text, or one JSON object per line.
        .target(
            name: "GotchuLogging",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            swiftSettings: swiftSettings
        ),
        // Each daemon's settings declared once (key, variable, flag, bounds, default, help) and read from a TOML or
        // JSON file, the environment and flags, in that order of precedence.
        .target(
            name: "GotchuSettings",
            dependencies: [
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // A point-of-sale's side of the kiosk's D-Bus interface, and the interface's names.
        .target(name: "GotchuKioskClient", dependencies: ["GotchuDBus"], swiftSettings: swiftSettings),
        // QR codes of the payment links the ledger serves and the kiosk's display shows: the encoder and an SVG
        // renderer, on the standard library alone.
        .target(name: "GotchuQR", swiftSettings: swiftSettings),
        // The terminal daemon: charges for a point-of-sale over D-Bus, their state on disk, the customer display.
        .target(
            name: "GotchuKiosk",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuReceipts", "GotchuLedgerClient", "GotchuDBus", "GotchuBlueZ",
                "GotchuSimulatedRadio",
                "GotchuSystemd", "GotchuKioskClient", "GotchuQR",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                "GotchuSettings",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            // The customer display's page, style and script, compiled into the binary.
            resources: ["display.mustache", "display.css", "display.js"].map { .embedInCode("Display/\($0)") },
            swiftSettings: swiftSettings
        ),
        // The kiosk's command line, shared by `gotchu kiosk` and the kiosk-only `gotchu-kiosk`.
        .target(
            name: "GotchuKioskCLI",
            dependencies: [
                "GotchuKiosk", "GotchuLogging", "GotchuSettings",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Helpers for tests: private dbus-daemon, servers on free loopback ports.
        .target(
            name: "GotchuTesting",
            dependencies: ["GotchuSimulatedRadio", "GotchuDBus"],
            swiftSettings: swiftSettings
        ),
        // Helpers for the ledger's tests, with no HTTP: a clock moved by hand, a fresh store of either kind, the
        // throwaway PostgreSQL databases of GOTCHU_TEST_POSTGRES_URL.
        .target(
            name: "GotchuLedgerTesting",
            dependencies: [
                "GotchuLedger", "GotchuLedgerSQLite", "GotchuLedgerPostgres", "GotchuTesting",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "gotchu",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuReceipts", "GotchuLedgerServer", "GotchuLedgerSQLite",
                "GotchuLedgerPostgres", "GotchuLedgerAPI", "GotchuWebhooks", "GotchuOIDC", "GotchuCheckout",
                "GotchuLedgerStores", "GotchuLedgerClient", "GotchuPeer", "GotchuKioskClient",
                "GotchuSimulatedRadio", "GotchuBlueZ", "GotchuDBus", "GotchuKiosk", "GotchuKioskCLI", "GotchuSystemd",
                "GotchuLogging", "GotchuSettings", "GotchuQR",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // A terminal's Ed25519 key (gotchu terminal enroll).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The kiosk alone, for a terminal: no ledger server, no PostgreSQL.
        .executableTarget(name: "gotchu-kiosk", dependencies: ["GotchuKioskCLI"], swiftSettings: swiftSettings),
        // The benchmarks, run from a checkout (`swift run -c release gotchu-bench …`): built with the rest, never
        // shipped (scripts/build-deb packages `gotchu` and `gotchu-kiosk` only). They stay in this package because
        // they measure what only package access reaches: the stores' own statements against raw SQL, and servers
        // started in process (`LedgerServer.withRunning`). A package of their own could link only the public
        // products, and would build every dependency a second time in CI.
        .executableTarget(
            name: "gotchu-bench",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuLedger", "GotchuLedgerServer", "GotchuLedgerSQLite",
                "GotchuLedgerPostgres", "GotchuLedgerClient", "GotchuBlueZ", "GotchuDBus", "GotchuQR", "GotchuWebhooks",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // The raw-SQL anchor.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // Latency percentiles.
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                // The webhook benchmark's receiver.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Benchmarks/gotchu-bench",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GotchuCoreTests",
            dependencies: ["GotchuCore", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        // The QR encoder's symbols against Python's qrcode module's, and read back by zbarimg from the rendered SVG.
        // Signed documents: the terminal's charges.
        .testTarget(
            name: "GotchuReceiptsTests",
            dependencies: ["GotchuReceipts", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "GotchuQRTests", dependencies: ["GotchuQR", "GotchuTesting"], swiftSettings: swiftSettings),
        // The ledger's rules against both stores, with no server: the engine's tests build and run in seconds.
        .testTarget(
            name: "GotchuLedgerTests",
            dependencies: [
                "GotchuLedger", "GotchuLedgerSQLite", "GotchuLedgerPostgres", "GotchuLedgerStores",
                "GotchuLedgerTesting", "GotchuCore", "GotchuAPI", "GotchuReceipts", "GotchuTesting",
                "GotchuSimulatedRadio", "GotchuLedgerAPI",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GotchuLedgerServerTests",
            dependencies: [
                "GotchuLedgerServer", "GotchuLedgerSQLite", "GotchuLedgerPostgres", "GotchuLedgerClient", "GotchuAPI",
                "GotchuReceipts", "GotchuLedgerAPI", "GotchuWebhooks", "GotchuOIDC", "GotchuCheckout",
                "GotchuTesting", "GotchuSimulatedRadio", "GotchuLogging", "GotchuLedgerStores", "GotchuLedgerTesting",
                "GotchuSettings",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GotchuDBusTests",
            dependencies: ["GotchuDBus", "GotchuTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GotchuBlueZTests",
            dependencies: ["GotchuBlueZ", "GotchuTesting"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GotchuSimulatedRadioTests",
            dependencies: ["GotchuSimulatedRadio", .product(name: "PropertyBased", package: "swift-property-based")],
            resources: [.copy("Recordings")],
            swiftSettings: swiftSettings
        ),
        // Seeded, bounded fuzzing of every parser that takes untrusted input.
        .testTarget(
            name: "GotchuFuzzTests",
            dependencies: [
                "GotchuCore", "GotchuAPI", "GotchuDBus", "GotchuBlueZ", "GotchuSimulatedRadio", "GotchuTesting",
                "CGotchuDBus",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GotchuPeerTests",
            dependencies: [
                "GotchuPeer", "GotchuTesting", "GotchuSimulatedRadio", "GotchuLedgerClient", "GotchuAPI",
                "GotchuReceipts", "GotchuCore", "GotchuBlueZ",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "GotchuKioskTests",
            dependencies: [
                "GotchuKiosk", "GotchuSystemd", "GotchuPeer", "GotchuTesting", "GotchuDBus", "GotchuSimulatedRadio",
                "GotchuLedgerClient", "GotchuAPI", "GotchuReceipts", "GotchuSettings",
                "GotchuCore", "GotchuKioskCLI", "GotchuKioskClient", "GotchuLedgerTesting", "GotchuLedgerPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
