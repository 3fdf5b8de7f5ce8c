import ArgumentParser
import Foundation
import GotchuLedgerPostgres
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuLogging
import GotchuSystemd
import Hummingbird
import Logging
import NIOSSL
import PostgresNIO
import ServiceLifecycle

struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "server",
        abstract: "Run the ledger server (payment sessions and the double-entry ledger) over HTTP.",
        discussion: """
            The ledger lives in one SQLite file in WAL mode (back it up with \
            `sqlite3 FILE ".backup COPY"`) or in a PostgreSQL database (--database \
            postgres://USER@HOST:PORT/DB, password in the URL or $PGPASSWORD; back it up with pg_dump). \
            On PostgreSQL the server keeps no state of its own, so several servers on one database behave \
            as one; give them the same JWT secret. Ctrl-C or SIGTERM stops it after the requests in \
            flight. The API contract is served at GET /openapi.yaml, and metrics for \
            Prometheus at GET /metrics.

            Examples:
              gotchu server --dev            # dev login and funding enabled
              gotchu server --dev --port 0   # any free port; prints "listening on ..."
              gotchu admin user add you@example.com --password-stdin   # the first account, then:
              gotchu login --email you@example.com
              gotchu server --tls-cert ledger.pem --tls-key ledger.key ...   # HTTPS
              gotchu server --registration open --mail-command /usr/sbin/sendmail \\
                --mail-from 'Gotchu <noreply@example.com>' ...   # open registration
              GOTCHU_JWT_SECRET=$(openssl rand -hex 32) \\
                gotchu server --host 0.0.0.0 --database /var/lib/gotchu/ledger.sqlite
              PGPASSWORD=... gotchu server --jwt-secret ... \\
                --database postgres://gotchu@db.internal:5432/gotchu
            """
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port = 8080

    @Option(
        help: ArgumentHelp(
            "SQLite database file (default: $XDG_DATA_HOME/gotchu/ledger.sqlite) or postgres://USER@HOST:PORT/DB URL.",
            valueName: "path-or-url"
        )
    )
    var database: String?

    @Flag(
        help:
            "Development mode: enables POST /auth/dev-login and POST /dev/fund, and keeps a generated JWT secret beside the database."
    )
    var dev = false

    @Option(
        help: ArgumentHelp(
            "Who may create accounts: closed (an operator, with gotchu admin user add) or open (anyone, with POST /auth/register).",
            valueName: "closed|open"
        )
    )
    var registration: Registration = .closed

    @Option(
        help: ArgumentHelp(
            "With --registration open: a sendmail-compatible program (/usr/sbin/sendmail, msmtp, ...) that mails each registrant the code confirming their address, run as PATH -i -- ADDRESS with an RFC 5322 message on stdin; it must exit 0 once it took the mail. Open registration does not start without it, except with --dev, which writes the codes to the log instead.",
            valueName: "path"
        )
    )
    var mailCommand: String?

    @Option(
        help: ArgumentHelp(
            "The From: of registration mails (default: Gotchu ledger <gotchu@THIS-HOST>).",
            valueName: "address"
        )
    )
    var mailFrom: String?

    @Option(
        help: ArgumentHelp(
            "bcrypt cost of new password hashes, log2 of the rounds (\(Bounds.bcryptCost)); each step doubles the time of a login.",
            valueName: "cost"
        )
    )
    var bcryptCost = Passwords.defaultCost

    @Option(
        help: ArgumentHelp(
            "The fewest characters of a new password (\(Bounds.minPasswordLength)).",
            valueName: "count"
        )
    )
    var minPasswordLength = Passwords.defaultMinimumLength

    @Option(
        help: ArgumentHelp(
            "How long an access token is valid, in seconds (\(Bounds.accessTokenLifetime)); clients refresh it with their refresh token.",
            valueName: "seconds"
        )
    )
    var accessTokenLifetime = 900

    @Option(
        help: ArgumentHelp(
            "How long an unused refresh token stays valid, in seconds (\(Bounds.refreshTokenLifetime)).",
            valueName: "seconds"
        )
    )
    var refreshTokenLifetime = 30 * 86_400

    @Option(
        name: .customLong("jwt-secret"),
        help: ArgumentHelp(
            "HS256 secret for tokens, at least 32 bytes (default: $GOTCHU_JWT_SECRET). Required without --dev.",
            valueName: "secret"
        )
    )
    var jwtSecret: String?

    @Option(
        help: ArgumentHelp(
            "How long a session stays payable, in seconds (\(Bounds.sessionLifetime)).",
            valueName: "seconds"
        )
    )
    var sessionLifetime = 300

    @Option(
        help: ArgumentHelp(
            "How long a lock holds unless paid, in seconds (\(Bounds.lockLifetime)).",
            valueName: "seconds"
        )
    )
    var lockLifetime = 30

    @Option(
        help: ArgumentHelp(
            "How long an unfinished payment's Idempotency-Key blocks retries before it counts as abandoned, in seconds (\(Bounds.inFlightTimeout)).",
            valueName: "seconds"
        )
    )
    var inFlightTimeout = 60

    @Option(
        help: ArgumentHelp(
            "PostgreSQL only: the most connections this server opens (\(Bounds.maxConnections)).",
            valueName: "count"
        )
    )
    var maxConnections = 20

    @Option(
        name: .customLong("db-connection-wait"),
        help: ArgumentHelp(
            "PostgreSQL only: how long a request waits for a database connection before it is refused with 503 database-unavailable and Retry-After (\(Bounds.connectionWait)). Short, so that clients and load balancers learn of an outage in seconds instead of hanging while the pool retries the database.",
            valueName: "seconds"
        )
    )
    var connectionWait = 3

    @Option(help: ArgumentHelp("Largest amount of one session, in cents (1 or more).", valueName: "cents"))
    var maxAmount: Int64 = 100_000_000_000

    @Option(
        help: ArgumentHelp(
            "The most HTTP connections served at once (\(Bounds.maxOpenConnections)). One more is answered 503 with Retry-After and closed; keep it well below the open-file limit (ulimit -n).",
            valueName: "count"
        )
    )
    var maxOpenConnections = LedgerLimits().maximumOpenConnections

    @Option(
        help: ArgumentHelp(
            "Seconds a kept-alive connection may wait for its next request before it is closed (\(Bounds.timeout)).",
            valueName: "seconds"
        )
    )
    var idleTimeout = Int(LedgerLimits().idleTimeout.components.seconds)

    @Option(
        help: ArgumentHelp(
            "Seconds a request's head and body may take to arrive, from its first byte; a slower one is dropped (\(Bounds.timeout)).",
            valueName: "seconds"
        )
    )
    var readTimeout = Int(LedgerLimits().readTimeout.components.seconds)

    @Option(
        help: ArgumentHelp(
            "The most session event streams (GET /sessions/{sid}/events) one user may hold open at once on this server (\(Bounds.maxEventStreams)); the next is answered 429.",
            valueName: "count"
        )
    )
    var maxEventStreams = LedgerLimits().eventStreamsPerUser

    @Option(
        help: ArgumentHelp(
            "POST /sessions/resolve per client address: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var resolveRate: Double = 10

    @Option(
        help: ArgumentHelp("POST /sessions/resolve per client address: burst (\(Bounds.burst)).", valueName: "count")
    )
    var resolveBurst = 20

    @Option(
        help: ArgumentHelp(
            "POST /sessions/lock per client address: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var lockRate: Double = 10

    @Option(help: ArgumentHelp("POST /sessions/lock per client address: burst (\(Bounds.burst)).", valueName: "count"))
    var lockBurst = 20

    @Option(
        help: ArgumentHelp(
            "POST /sessions/lock per user: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var userLockRate: Double = 2

    @Option(help: ArgumentHelp("POST /sessions/lock per user: burst (\(Bounds.burst)).", valueName: "count"))
    var userLockBurst = 5

    @Option(
        help: ArgumentHelp(
            "POST /wallet/send per user: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var sendRate: Double = 5

    @Option(help: ArgumentHelp("POST /wallet/send per user: burst (\(Bounds.burst)).", valueName: "count"))
    var sendBurst = 10

    @Option(
        help: ArgumentHelp(
            "POST /wallet/payouts per user: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var payoutRate: Double = 5

    @Option(help: ArgumentHelp("POST /wallet/payouts per user: burst (\(Bounds.burst)).", valueName: "count"))
    var payoutBurst = 10

    @Option(
        help: ArgumentHelp(
            "How many sessions one payer may hold locked at once (\(Bounds.maxLocksPerPayer)).",
            valueName: "count"
        )
    )
    var maxLocksPerPayer = 3

    @Flag(
        help:
            "Count rate limits against the last X-Forwarded-For address, not the peer. Only behind a proxy that sets it."
    )
    var trustForwardedFor = false

    @Option(
        help: ArgumentHelp(
            "Who may resolve an EID: requires-login (a valid bearer token) or public (anyone, as the first protocol).",
            valueName: "access"
        )
    )
    var resolve: ResolveAccess = .requiresLogin

    @Option(
        help: ArgumentHelp(
            "How long an EID rotated away keeps resolving, in seconds (\(Bounds.eidGrace)).",
            valueName: "seconds"
        )
    )
    var eidGrace = 10

    @Option(
        name: .customLong("tls-cert"),
        help: ArgumentHelp(
            "Serve HTTPS with this PEM certificate chain (the server's certificate first); needs --tls-key.",
            valueName: "path"
        )
    )
    var tlsCert: String?

    @Option(
        name: .customLong("tls-key"),
        help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "path")
    )
    var tlsKey: String?

    @Option(
        name: .customLong("oidc-issuer"),
        help: ArgumentHelp(
            "Also accept RS256/ES256 access tokens of this OpenID Connect issuer (exactly its iss claim); needs --oidc-audience. Its users are provisioned on first use.",
            valueName: "url"
        )
    )
    var oidcIssuer: String?

    @Option(
        name: .customLong("oidc-audience"),
        help: ArgumentHelp("The audience (aud) the issuer's tokens must name.", valueName: "audience")
    )
    var oidcAudience: String?

    @Option(
        name: .customLong("oidc-jwks-url"),
        help: ArgumentHelp(
            "Where the issuer publishes its keys (default: jwks_uri of ISSUER/.well-known/openid-configuration).",
            valueName: "url"
        )
    )
    var oidcJWKSURL: String?

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: Logger.Level = .info

    @Option(help: "Log format on standard error: text, or json (one JSON object per line).")
    var logFormat: LogFormat = .text

    /// The range of every bounded option. Durations stay far below what the stores' millisecond arithmetic can
    /// hold, and counts below what memory and file descriptors allow.
    enum Bounds {
        static let sessionLifetime = 1...86_400
        static let lockLifetime = 1...3_600
        static let inFlightTimeout = 1...3_600
        static let maxConnections = 1...10_000
        static let connectionWait = 1...60
        static let maxOpenConnections = LedgerLimits.allowedOpenConnections
        static let timeout = 1...3_600
        static let rate = RateLimit.allowedPerSecond
        static let burst = RateLimit.allowedBurst
        static let maxLocksPerPayer = 1...1_000
        static let eidGrace = 0...3_600
        static let bcryptCost = Passwords.allowedCosts
        static let minPasswordLength = 8...72
        static let accessTokenLifetime = 60...86_400
        static let refreshTokenLifetime = 3_600...(365 * 86_400)
        static let maxEventStreams = 1...1_000
    }

    func validate() throws {
        func check<Value: Comparable>(_ option: String, _ value: Value, _ range: ClosedRange<Value>) throws {
            guard range.contains(value) else { throw ValidationError("--\(option) must be \(range), got \(value)") }
        }
        try check("port", port, 0...65535)
        if registration == .open, mailCommand == nil, !dev {
            throw ValidationError(
                "--registration open needs --mail-command PATH, a sendmail-compatible program: each registrant is "
                    + "mailed a code that proves the address is theirs before the account can log in or be paid "
                    + "(only a --dev server registers without it, writing the codes to its log)"
            )
        }
        if let mailCommand {
            guard registration == .open else {
                throw ValidationError("--mail-command is used only with --registration open")
            }
            guard FileManager.default.isExecutableFile(atPath: mailCommand) else {
                throw ValidationError("--mail-command \(mailCommand) is not an executable file")
            }
        }
        if let mailFrom, mailFrom.contains(where: { $0.isNewline }) || !mailFrom.contains("@") {
            throw ValidationError(
                "--mail-from must be one line holding an address, such as 'Gotchu <noreply@example.com>'"
            )
        }
        guard (tlsCert == nil) == (tlsKey == nil) else {
            throw ValidationError("--tls-cert and --tls-key go together: pass both for HTTPS, or neither")
        }
        try check("session-lifetime", sessionLifetime, Bounds.sessionLifetime)
        try check("lock-lifetime", lockLifetime, Bounds.lockLifetime)
        try check("in-flight-timeout", inFlightTimeout, Bounds.inFlightTimeout)
        if let database, PostgresURL.isPostgresURL(database) {
            do {
                _ = try PostgresURL(database)
            } catch {
                throw ValidationError("--database: \(error)")
            }
        }
        guard maxAmount > 0 else { throw ValidationError("--max-amount must be 1 or more, got \(maxAmount)") }
        try check("max-connections", maxConnections, Bounds.maxConnections)
        try check("db-connection-wait", connectionWait, Bounds.connectionWait)
        try check("max-open-connections", maxOpenConnections, Bounds.maxOpenConnections)
        try check("idle-timeout", idleTimeout, Bounds.timeout)
        try check("read-timeout", readTimeout, Bounds.timeout)
        try check("max-locks-per-payer", maxLocksPerPayer, Bounds.maxLocksPerPayer)
        try check("eid-grace", eidGrace, Bounds.eidGrace)
        try check("bcrypt-cost", bcryptCost, Bounds.bcryptCost)
        try check("min-password-length", minPasswordLength, Bounds.minPasswordLength)
        try check("access-token-lifetime", accessTokenLifetime, Bounds.accessTokenLifetime)
        try check("refresh-token-lifetime", refreshTokenLifetime, Bounds.refreshTokenLifetime)
        _ = try identityConfiguration
        try check("max-event-streams", maxEventStreams, Bounds.maxEventStreams)
        for (name, rate, burst) in [
            ("resolve", resolveRate, resolveBurst), ("lock", lockRate, lockBurst),
            ("user-lock", userLockRate, userLockBurst), ("send", sendRate, sendBurst),
            ("payout", payoutRate, payoutBurst),
        ] {
            // NaN fails every comparison, so `contains` refuses it along with infinities.
            guard rate == 0 || Bounds.rate.contains(rate) else {
                throw ValidationError("--\(name)-rate must be 0 (no limit) or \(Bounds.rate), got \(rate)")
            }
            try check("\(name)-burst", burst, Bounds.burst)
        }
    }

    func run() async throws {
        logFormat.bootstrap(level: logLevel)
        let logger = Logger(label: "gotchu.server")
        warnIfDescriptorsShort(logger: logger)
        var policy = LedgerPolicy()
        policy.sessionLifetime = .seconds(sessionLifetime)
        policy.lockLifetime = .seconds(lockLifetime)
        policy.inFlightTimeout = .seconds(inFlightTimeout)
        policy.maximumAmount = maxAmount
        policy.maximumLocksPerPayer = maxLocksPerPayer
        policy.eidGrace = .seconds(eidGrace)
        policy.passwordCost = bcryptCost
        policy.minimumPasswordLength = minPasswordLength
        policy.refreshTokenLifetime = .seconds(refreshTokenLifetime)
        if let database, PostgresURL.isPostgresURL(database) {
            let url = try PostgresURL(database)
            let store = PostgresLedgerStore(
                url: url,
                policy: policy,
                maximumConnections: maxConnections,
                connectionWait: .seconds(connectionWait),
                logger: logger
            )
            // Replicas on one machine share the generated development secret; elsewhere pass the same secret.
            let secretFile = Paths.dataHome.appendingPathComponent(
                "postgres-\(url.host)-\(url.port)-\(url.database).jwt-secret"
            )
            logger.info("ledger database", metadata: ["postgres": "\(url.redacted)", "dev": "\(dev)"])
            try await serve(store: store, secretFile: secretFile, services: [store.client], logger: logger)
        } else {
            let databaseURL =
                database.map { URL(fileURLWithPath: $0) } ?? Paths.dataHome.appendingPathComponent("ledger.sqlite")
            try Paths.ensure(databaseURL.deletingLastPathComponent())
            let store = try SQLiteLedgerStore(path: databaseURL.path, policy: policy)
            logger.info("ledger database", metadata: ["path": "\(databaseURL.path)", "dev": "\(dev)"])
            try await serve(
                store: store,
                secretFile: databaseURL.appendingPathExtension("jwt-secret"),
                services: [],
                logger: logger
            )
        }
    }

    /// What mails registrants their codes: the --mail-command, or on a development server without one the log.
    private func registrationMailer(logger: Logger) -> (any RegistrationMailer)? {
        if let mailCommand {
            return SendmailCommand(
                path: mailCommand,
                sender: mailFrom ?? "Gotchu ledger <gotchu@\(ProcessInfo.processInfo.hostName)>"
            )
        }
        guard registration == .open, dev else { return nil }
        logger.warning("open registration without --mail-command: confirmation codes are written to this log")
        return LoggedRegistrationMailer(logger: logger)
    }

    /// Migrates the store, then serves until SIGTERM or SIGINT.
    private func serve(
        store: some LedgerStore,
        secretFile: URL,
        services: [any Service],
        logger: Logger
    ) async throws {
        let tokens = try await TokenAuthority(
            secret: try secret(file: secretFile),
            lifetime: .seconds(accessTokenLifetime)
        )
        let identities = try identityConfiguration.map { OIDCVerifier($0) }
        let host = self.host
        var tls: TLSConfiguration?
        if let tlsCert, let tlsKey {
            do {
                tls = try LedgerServer.tlsConfiguration(certificateFile: tlsCert, keyFile: tlsKey)
            } catch {
                throw CLIError("\(error)")
            }
        }
        let scheme = tls == nil ? "http" : "https"
        // Under systemd (Type=notify) readiness is the port listening, not the process having started.
        let notifier = SystemdNotifier(logger: logger)
        let application = LedgerServer.application(
            store: store,
            tokens: tokens,
            identities: identities,
            host: host,
            port: port,
            developmentMode: dev,
            registration: registration,
            mailer: registrationMailer(logger: logger),
            limits: limits,
            metrics: LedgerMetrics(),
            tls: tls,
            services: services,
            logger: logger
        ) { port in
            // Unbuffered, so a parent process reading the pipe sees the line at once.
            FileHandle.standardOutput.write(Data("listening on \(scheme)://\(host):\(port)\n".utf8))
            notifier.ready(status: "listening on \(scheme)://\(host):\(port)")
        }
        do {
            try await application.runService()
        } catch {
            notifier.stopping(status: "failed: \(error)")
            throw error
        }
        notifier.stopping()
    }

    /// Warns when the open-file limit leaves too little room for the connection cap: past it, accepting fails and
    /// clients wait in the backlog instead of being answered. Room is kept for refusals in progress, the store, the
    /// PostgreSQL pool and the process's own descriptors.
    private func warnIfDescriptorsShort(logger: Logger) {
        var limit = rlimit()
        #if os(Linux)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        // An unlimited limit is the largest value, so it never warns.
        guard getrlimit(resource, &limit) == 0 else { return }
        let needed = maxOpenConnections + 64 + maxConnections + 64
        guard UInt64(limit.rlim_cur) < UInt64(needed) else { return }
        logger.warning(
            "the open-file limit is below what --max-open-connections needs; raise it (ulimit -n) or lower the cap",
            metadata: [
                "open_file_limit": "\(limit.rlim_cur)", "needed": "\(needed)",
                "max_open_connections": "\(maxOpenConnections)",
            ]
        )
    }

    /// The external issuer the options trust, if any.
    var identityConfiguration: OIDCVerifier.Configuration? {
        get throws {
            guard let oidcIssuer else {
                guard oidcAudience == nil, oidcJWKSURL == nil else {
                    throw ValidationError("--oidc-audience and --oidc-jwks-url need --oidc-issuer")
                }
                return nil
            }
            guard let oidcAudience, !oidcAudience.isEmpty else {
                throw ValidationError("--oidc-issuer needs --oidc-audience (the aud its tokens name for this ledger)")
            }
            guard Self.isTrustworthy(url: oidcIssuer) else {
                throw ValidationError("--oidc-issuer must be an https URL (http only on loopback), got '\(oidcIssuer)'")
            }
            var configuration = OIDCVerifier.Configuration(issuer: oidcIssuer, audience: oidcAudience)
            if let oidcJWKSURL {
                guard Self.isTrustworthy(url: oidcJWKSURL), let url = URL(string: oidcJWKSURL) else {
                    throw ValidationError(
                        "--oidc-jwks-url must be an https URL (http only on loopback), got '\(oidcJWKSURL)'"
                    )
                }
                configuration.jwksURL = url
            }
            return configuration
        }
    }

    /// Whether keys fetched from `text` can be trusted: https, or http to this machine only.
    static func isTrustworthy(url text: String) -> Bool {
        URL(string: text).map(OIDCVerifier.isTrustworthy) ?? false
    }

    /// The rate and connection limits the options ask for.
    var limits: LedgerLimits {
        func rate(_ perSecond: Double, _ burst: Int) -> RateLimit? {
            perSecond > 0 ? RateLimit(perSecond: perSecond, burst: burst) : nil
        }
        var limits = LedgerLimits()
        limits.resolvePerAddress = rate(resolveRate, resolveBurst)
        limits.lockPerAddress = rate(lockRate, lockBurst)
        limits.lockPerUser = rate(userLockRate, userLockBurst)
        limits.sendPerUser = rate(sendRate, sendBurst)
        limits.payoutPerUser = rate(payoutRate, payoutBurst)
        limits.trustForwardedFor = trustForwardedFor
        limits.resolveAccess = resolve
        limits.maximumOpenConnections = maxOpenConnections
        limits.idleTimeout = .seconds(idleTimeout)
        limits.readTimeout = .seconds(readTimeout)
        limits.eventStreamsPerUser = maxEventStreams
        return limits
    }

    /// The JWT secret: the flag, the environment, or (with --dev only) one generated and kept in `file`.
    private func secret(file: URL) throws -> String {
        if let secret = jwtSecret ?? ProcessInfo.processInfo.environment["GOTCHU_JWT_SECRET"] {
            guard secret.utf8.count >= 32 else { throw CLIError("the JWT secret must be at least 32 bytes") }
            return secret
        }
        guard dev else {
            throw CLIError("a JWT secret is required: pass --jwt-secret or set GOTCHU_JWT_SECRET (or use --dev)")
        }
        try Paths.ensure(file.deletingLastPathComponent())
        if let existing = try? String(contentsOf: file, encoding: .utf8), existing.utf8.count >= 32 { return existing }
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        try Paths.writePrivate(Data(secret.utf8), to: file)
        return secret
    }
}
