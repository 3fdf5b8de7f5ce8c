import GotchuCheckout
import GotchuLedger
package import GotchuSettings
import GotchuWebhooks

/// One layer of `gotchu server`'s settings: the built-in values, the config file, the environment or the command
/// line. Each setting reads as a property, `nil` when the layer says nothing (`layer.port = 0`).
package typealias LedgerServerSettings = SettingsLayer<LedgerServerSettingsSchema>

/// Every setting of `gotchu server`, declared once: its key in the config file (snake_case), what its value must be,
/// its built-in value and its help. Its environment variable is `GOTCHU_SERVER_` and the key in upper case, its flag
/// `--` and the key with dashes (`session_lifetime`: `GOTCHU_SERVER_SESSION_LIFETIME`, `--session-lifetime`); the
/// order is the example config's (deploy/server.toml). Built-in values come from ``LedgerPolicy`` and
/// ``LedgerLimits`` where those have them.
///
/// The JWT secret is never read from a config file: it comes from `--jwt-secret`, `GOTCHU_SERVER_JWT_SECRET` (or the
/// older `GOTCHU_JWT_SECRET`), or the file `jwt_secret_file` names. Nor is the OpenID Connect client's secret
/// (`oidc_client_secret`, or the file `oidc_client_secret_file` names).
package struct LedgerServerSettingsSchema: SettingsSchema {
    /// `GOTCHU_SERVER_`.
    package static let environmentPrefix = "GOTCHU_SERVER_"
    /// "server".
    package static let subject = "server"
    /// `GOTCHU_SERVER_CONFIG`, the config file's own variable.
    package static let otherEnvironmentVariables: Set<String> = [configEnvironmentVariable]
    /// The variable naming the config file, as `--config` does.
    package static let configEnvironmentVariable = "GOTCHU_SERVER_CONFIG"

    private static let policy = LedgerPolicy()
    private static let limits = LedgerLimits()
    private static func seconds(_ duration: Duration) -> Int { Int(duration.components.seconds) }

    // MARK: Listening

    /// `host`.
    package let host = Setting<String>(
        "host",
        default: "127.0.0.1",
        summary: "Address to listen on.",
        valueName: "host"
    )
    /// `port`.
    package let port = Setting<Int>(
        "port",
        default: 8080,
        in: 0...65535,
        summary: "Port to listen on; 0 picks a free one."
    )
    /// `tls_cert`.
    package let tlsCert = Setting<String>(
        "tls_cert",
        summary:
            "Serve HTTPS with this PEM certificate chain (the server's certificate first); needs the key, tls_key.",
        valueName: "path"
    )
    /// `tls_key`.
    package let tlsKey = Setting<String>(
        "tls_key",
        summary: "The PEM private key of the certificate, tls_cert.",
        valueName: "path"
    )
    /// `public_url`.
    package let publicURL = Setting<String>(
        "public_url",
        summary: "The address payers' phones reach this ledger at (https://pay.example.com/, a path allowed; behind a "
            + "proxy, the proxy's): the base of the web checkout, PUBLIC_URL/p/EID, that QR codes "
            + "(GET /p/{eid}/qr.svg) and the checkout_url of new EIDs name. https, or http only on loopback or with "
            + "dev. Without it there are no QR codes.",
        valueName: "url"
    )

    // MARK: The database

    /// `database`.
    package let database = Setting<String>(
        "database",
        summary: "SQLite database file (default: $XDG_DATA_HOME/gotchu/ledger.sqlite) or "
            + "postgres://USER@HOST:PORT/DB URL; several hosts (HOST1:PORT,HOST2:PORT) name a primary and its "
            + "standbys, and the server writes to whichever is the primary.",
        valueName: "path-or-url"
    )
    /// `max_connections`.
    package let maxConnections = Setting<Int>(
        "max_connections",
        default: 20,
        in: 1...10_000,
        summary: "PostgreSQL only: the most connections this server opens.",
        valueName: "count"
    )
    /// `db_connection_wait`.
    package let dbConnectionWait = Setting<Int>(
        "db_connection_wait",
        default: 3,
        in: 1...60,
        unit: "seconds",
        summary: "PostgreSQL only: how long a request waits for a database connection before it is refused with 503 "
            + "database-unavailable and Retry-After. Short, so that clients and load balancers learn of an outage in "
            + "seconds instead of hanging while the pool retries the database."
    )

    // MARK: Accounts and tokens

    /// `dev`.
    package let dev = Setting<Bool>(
        "dev",
        default: false,
        summary: "Development mode: enables POST /auth/dev-login and POST /dev/fund, and keeps a generated JWT secret "
            + "beside the database."
    )
    /// `registration`.
    package let registration = Setting<String>(
        "registration",
        default: Registration.closed.rawValue,
        oneOf: Registration.allCases.map(\.rawValue),
        summary: "Who may create accounts: closed (an operator, with gotchu admin user add) or open (anyone, with "
            + "POST /auth/register)."
    )
    /// `mail_command`.
    package let mailCommand = Setting<String>(
        "mail_command",
        summary: "With registration open: a sendmail-compatible program (/usr/sbin/sendmail, msmtp, ...) that mails "
            + "each registrant the code confirming their address, run as PATH -i -- ADDRESS with an RFC 5322 message "
            + "on stdin; it must exit 0 once it took the mail. Open registration does not start without it, except "
            + "with dev, which writes the codes to the log instead.",
        valueName: "path"
    )
    /// `mail_from`.
    package let mailFrom = Setting<String>(
        "mail_from",
        summary: "The From: of registration mails (default: Gotchu ledger <gotchu@THIS-HOST>).",
        valueName: "address"
    )
    /// `bcrypt_cost`.
    package let bcryptCost = Setting<Int>(
        "bcrypt_cost",
        default: Self.policy.passwordCost,
        in: Passwords.allowedCosts,
        summary: "bcrypt cost of new password hashes, log2 of the rounds; each step doubles the time of a login.",
        valueName: "cost"
    )
    /// `min_password_length`.
    package let minPasswordLength = Setting<Int>(
        "min_password_length",
        default: Self.policy.minimumPasswordLength,
        in: 8...72,
        summary: "The fewest characters of a new password.",
        valueName: "count"
    )
    /// `access_token_lifetime`.
    package let accessTokenLifetime = Setting<Int>(
        "access_token_lifetime",
        default: 900,
        in: 60...86_400,
        unit: "seconds",
        summary: "How long an access token is valid, in seconds; clients refresh it with their refresh token."
    )
    /// `refresh_token_lifetime`.
    package let refreshTokenLifetime = Setting<Int>(
        "refresh_token_lifetime",
        default: Self.seconds(policy.refreshTokenLifetime),
        in: 3_600...(365 * 86_400),
        unit: "seconds",
        summary: "How long an unused refresh token stays valid, in seconds."
    )
    /// `jwt_secret`: never in a config file.
    package let jwtSecret = Setting<String>(
        "jwt_secret",
        expected: "at least 32 bytes",
        summary: "HS256 secret for tokens, at least 32 bytes; never in the config file. Required without dev, or "
            + "jwt_secret_file.",
        valueName: "secret",
        isSecret: true,
        environmentAliases: ["GOTCHU_JWT_SECRET"],
        isAllowed: { $0.utf8.count >= 32 }
    )
    /// `jwt_secret_file`.
    package let jwtSecretFile = Setting<String>(
        "jwt_secret_file",
        summary: "A file holding the HS256 secret (such as a systemd credential), readable by no one but its owner "
            + "and group.",
        valueName: "path"
    )

    // MARK: External identities

    /// `oidc_issuer`.
    package let oidcIssuer = Setting<String>(
        "oidc_issuer",
        summary: "Also accept the access tokens of this external OpenID Connect issuer (https; http only on "
            + "loopback), its users provisioned on first use.",
        valueName: "url"
    )
    /// `oidc_audience`.
    package let oidcAudience = Setting<String>(
        "oidc_audience",
        summary: "The audience (aud) the issuer's tokens must name.",
        valueName: "audience"
    )
    /// `oidc_jwks_url`.
    package let oidcJWKSURL = Setting<String>(
        "oidc_jwks_url",
        summary: "Where the issuer publishes its keys (default: jwks_uri of ISSUER/.well-known/openid-configuration).",
        valueName: "url"
    )
    /// `oidc_client_id`.
    package let oidcClientID = Setting<String>(
        "oidc_client_id",
        summary: "The client id of sign-in on the web checkout through the issuer (the authorization code flow with "
            + "PKCE), registered there with the redirect URI PUBLIC_URL/p/oidc/callback (default: oidc_audience).",
        valueName: "id"
    )
    /// `oidc_client_secret`: never in a config file.
    package let oidcClientSecret = Setting<String>(
        "oidc_client_secret",
        summary: "The client's secret at the issuer, for a confidential client (none: a public client, PKCE alone); "
            + "never in the config file. Or oidc_client_secret_file.",
        valueName: "secret",
        isSecret: true
    )
    /// `oidc_client_secret_file`.
    package let oidcClientSecretFile = Setting<String>(
        "oidc_client_secret_file",
        summary: "A file holding the client's secret at the issuer (such as a systemd credential), readable by no one "
            + "but its owner and group.",
        valueName: "path"
    )

    // MARK: Payments

    /// `session_lifetime`.
    package let sessionLifetime = Setting<Int>(
        "session_lifetime",
        default: Self.seconds(policy.sessionLifetime),
        in: 1...86_400,
        unit: "seconds",
        summary: "How long a session stays payable, in seconds."
    )
    /// `lock_lifetime`.
    package let lockLifetime = Setting<Int>(
        "lock_lifetime",
        default: Self.seconds(policy.lockLifetime),
        in: 1...3_600,
        unit: "seconds",
        summary: "How long a lock holds unless paid, in seconds."
    )
    /// `in_flight_timeout`.
    package let inFlightTimeout = Setting<Int>(
        "in_flight_timeout",
        default: Self.seconds(policy.inFlightTimeout),
        in: 1...3_600,
        unit: "seconds",
        summary: "How long an unfinished payment's Idempotency-Key blocks retries before it counts as abandoned, in "
            + "seconds."
    )
    /// `max_amount`.
    package let maxAmount = Setting<Int>(
        "max_amount",
        default: Int(Self.policy.maximumAmount),
        expected: "a whole number of cents, 1 or more",
        summary: "Largest amount of one session, in cents.",
        bounds: "1 or more",
        valueName: "cents",
        isAllowed: { $0 >= 1 }
    )
    /// `max_locks_per_payer`.
    package let maxLocksPerPayer = Setting<Int>(
        "max_locks_per_payer",
        default: Self.policy.maximumLocksPerPayer,
        in: 1...1_000,
        summary: "How many sessions one payer may hold locked at once.",
        valueName: "count"
    )
    /// `resolve`.
    package let resolve = Setting<String>(
        "resolve",
        default: Self.limits.resolveAccess.rawValue,
        oneOf: ResolveAccess.allCases.map(\.rawValue),
        summary: "Who may resolve an EID: requires-login (a valid bearer token) or public (anyone, as the first "
            + "protocol)."
    )
    /// `eid_grace`.
    package let eidGrace = Setting<Int>(
        "eid_grace",
        default: Self.seconds(policy.eidGrace),
        in: 0...3_600,
        unit: "seconds",
        summary: "How long an EID rotated away keeps resolving, in seconds."
    )

    // MARK: The web checkout

    private static let checkout = CheckoutSettings()

    /// `locale`.
    package let locale = Setting<String>(
        "locale",
        default: Self.checkout.locale,
        expected: "a locale such as en_US or de_DE",
        summary: "How the web checkout (/p/EID) writes amounts: a locale such as en_US ($12.50) or de_DE (12,50 $), "
            + "in the ledger's currency.",
        valueName: "locale",
        isAllowed: { CheckoutSettings.isKnownLocale($0) }
    )
    /// `browser_session_lifetime`.
    package let browserSessionLifetime = Setting<Int>(
        "browser_session_lifetime",
        default: Self.seconds(checkout.browserSessionLifetime),
        in: CheckoutSettings.allowedBrowserSessionLifetimes,
        unit: "seconds",
        summary: "How long a sign-in on the web checkout lasts, in seconds, from the sign-in (not renewed by use)."
    )

    // MARK: Connections

    /// `max_open_connections`.
    package let maxOpenConnections = Setting<Int>(
        "max_open_connections",
        default: Self.limits.maximumOpenConnections,
        in: LedgerLimits.allowedOpenConnections,
        summary: "The most HTTP connections served at once. One more is answered 503 with Retry-After and closed; "
            + "keep it well below the open-file limit (ulimit -n).",
        valueName: "count"
    )
    /// `idle_timeout`.
    package let idleTimeout = Setting<Int>(
        "idle_timeout",
        default: Self.seconds(limits.idleTimeout),
        in: 1...3_600,
        unit: "seconds",
        summary: "Seconds a kept-alive connection may wait for its next request before it is closed."
    )
    /// `read_timeout`.
    package let readTimeout = Setting<Int>(
        "read_timeout",
        default: Self.seconds(limits.readTimeout),
        in: 1...3_600,
        unit: "seconds",
        summary: "Seconds a request's head and body may take to arrive, from its first byte; a slower one is dropped."
    )
    /// `max_event_streams`.
    package let maxEventStreams = Setting<Int>(
        "max_event_streams",
        default: Self.limits.eventStreamsPerUser,
        in: 1...1_000,
        summary: "The most session event streams (GET /sessions/{sid}/events) one user may hold open at once on this "
            + "server; the next is answered 429.",
        valueName: "count"
    )
    /// `trust_forwarded_for`.
    package let trustForwardedFor = Setting<Bool>(
        "trust_forwarded_for",
        default: Self.limits.trustForwardedFor,
        summary: "Count rate limits against the last X-Forwarded-For address, not the peer. Only behind a proxy that "
            + "sets it."
    )

    // MARK: Request rates

    /// `resolve_rate`.
    package let resolveRate = Self.rate(
        "resolve",
        Self.limits.resolvePerAddress,
        "POST /sessions/resolve per client address"
    )
    /// `resolve_burst`.
    package let resolveBurst = Self.burst(
        "resolve",
        Self.limits.resolvePerAddress,
        "POST /sessions/resolve per client address"
    )
    /// `lock_rate`.
    package let lockRate = Self.rate("lock", Self.limits.lockPerAddress, "POST /sessions/lock per client address")
    /// `lock_burst`.
    package let lockBurst = Self.burst("lock", Self.limits.lockPerAddress, "POST /sessions/lock per client address")
    /// `user_lock_rate`.
    package let userLockRate = Self.rate("user_lock", Self.limits.lockPerUser, "POST /sessions/lock per user")
    /// `user_lock_burst`.
    package let userLockBurst = Self.burst("user_lock", Self.limits.lockPerUser, "POST /sessions/lock per user")
    /// `send_rate`.
    package let sendRate = Self.rate("send", Self.limits.sendPerUser, "POST /wallet/send per user")
    /// `send_burst`.
    package let sendBurst = Self.burst("send", Self.limits.sendPerUser, "POST /wallet/send per user")
    /// `payout_rate`.
    package let payoutRate = Self.rate("payout", Self.limits.payoutPerUser, "POST /wallet/payouts per user")
    /// `payout_burst`.
    package let payoutBurst = Self.burst("payout", Self.limits.payoutPerUser, "POST /wallet/payouts per user")

    private static func rate(_ name: String, _ limit: RateLimit?, _ what: String) -> Setting<Double> {
        Setting<Double>(
            "\(name)_rate",
            default: limit?.perSecond ?? 0,
            in: RateLimit.allowedPerSecond,
            zero: "no limit",
            summary: "\(what): requests per second.",
            valueName: "per-second"
        )
    }

    private static func burst(_ name: String, _ limit: RateLimit?, _ what: String) -> Setting<Int> {
        Setting<Int>(
            "\(name)_burst",
            default: limit?.burst ?? RateLimit.allowedBurst.lowerBound,
            in: RateLimit.allowedBurst,
            summary: "\(what): burst.",
            valueName: "count"
        )
    }

    // MARK: Webhooks

    private static let webhooks = WebhookOptions()

    /// `webhook_retry_base`.
    package let webhookRetryBase = Setting<Int>(
        "webhook_retry_base",
        default: Self.seconds(webhooks.retryBase),
        in: 1...86_400,
        unit: "seconds",
        summary: "How long a failed webhook delivery waits before its first retry, in seconds; each later retry waits "
            + "twice as long as the one before (with jitter), for up to 3 days, after which the delivery is failed."
    )
    /// `webhook_allow_hosts`.
    package let webhookAllowHosts = Setting<String>(
        "webhook_allow_hosts",
        summary: "Hosts (names or addresses, separated by commas) that webhook endpoints may reach over plain http "
            + "and at any address, even loopback or private ones: a deployment's own receivers. Every other endpoint "
            + "must be https and resolve to public addresses only.",
        valueName: "hosts"
    )
    /// `webhook_concurrency`.
    package let webhookConcurrency = Setting<Int>(
        "webhook_concurrency",
        default: Self.webhooks.concurrencyPerEndpoint,
        in: 1...64,
        summary: "The most webhook deliveries in flight to one endpoint at once, on this server; a slow endpoint "
            + "holds up no other.",
        valueName: "count"
    )

    // MARK: Logging

    /// `log_level`.
    package let logLevel = Setting<String>(
        "log_level",
        default: "info",
        oneOf: ["trace", "debug", "info", "notice", "warning", "error", "critical"],
        summary: "Log level."
    )
    /// `log_format`.
    package let logFormat = Setting<String>(
        "log_format",
        default: "text",
        oneOf: ["text", "json"],
        summary: "Log format on standard error: text, or json (one JSON object per line)."
    )

    /// The schema.
    package init() {}
}
