import ArgumentParser
import Foundation
import GotchuLedgerServer
import GotchuLedgerStores
import GotchuLogging
import Logging

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

    @OptionGroup var rateLimits: RateLimitOptions

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
        if let database { _ = try LedgerDatabase.option(database) }
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
        try rateLimits.check()
    }

    func run() async throws {
        logFormat.bootstrap(level: logLevel)
        let logger = Logger(label: "gotchu.server")
        let database = try LedgerDatabase.option(self.database ?? LedgerDatabase.defaultPath)
        let opened = try database.open(
            LedgerDatabase.Options(
                policy: policy,
                maximumConnections: maxConnections,
                connectionWait: .seconds(connectionWait),
                logger: logger
            )
        )
        logger.info("ledger database", metadata: database.logMetadata.merging(["dev": "\(dev)"]) { $1 })
        var configuration = LedgerServer.Configuration()
        configuration.host = host
        configuration.port = port
        configuration.developmentMode = dev
        configuration.registration = registration
        configuration.mailCommand = mailCommand
        configuration.mailFrom = mailFrom
        configuration.accessTokenLifetime = .seconds(accessTokenLifetime)
        configuration.jwtSecret = jwtSecret ?? ProcessInfo.processInfo.environment["GOTCHU_JWT_SECRET"]
        // Replicas on one machine share the generated development secret; elsewhere pass the same secret.
        configuration.developmentSecretFile = database.companionFile(
            pathExtension: "jwt-secret",
            directory: Paths.dataHome
        )
        configuration.tlsCertificateFile = tlsCert
        configuration.tlsKeyFile = tlsKey
        configuration.identities = try identityConfiguration
        configuration.limits = limits
        configuration.storeConnections = maxConnections
        do {
            try await LedgerServer.run(configuration, store: opened.store, services: opened.services, logger: logger) {
                // Unbuffered, so a parent process reading the pipe sees the line at once.
                FileHandle.standardOutput.write(Data("listening on \($0)\n".utf8))
            }
        } catch let error as LedgerServer.SetupError {
            throw CLIError(error.description)
        }
    }

    /// The ledger's rules the options ask for.
    var policy: LedgerPolicy {
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
        return policy
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
        var limits = LedgerLimits()
        rateLimits.apply(to: &limits)
        limits.trustForwardedFor = trustForwardedFor
        limits.resolveAccess = resolve
        limits.maximumOpenConnections = maxOpenConnections
        limits.idleTimeout = .seconds(idleTimeout)
        limits.readTimeout = .seconds(readTimeout)
        limits.eventStreamsPerUser = maxEventStreams
        return limits
    }
}
