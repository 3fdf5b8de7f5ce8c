public import Foundation
public import GotchuCheckout
import GotchuLedgerClient
public import GotchuOIDC
import GotchuSystemd
public import GotchuWebhooks
import Hummingbird
public import Logging
package import NIOSSL
public import ServiceLifecycle

extension LedgerServer {
    /// Everything a production server is run with besides its store: what `gotchu server` parses its options into.
    public struct Configuration: Sendable {
        /// The address to listen on.
        public var host = "127.0.0.1"
        /// The port to listen on; 0 picks a free one.
        public var port = 8080
        /// Enables `/auth/dev-login` and `/dev/fund`, and lets the server generate its JWT secret.
        public var developmentMode = false
        /// Who may create accounts.
        public var registration: Registration = .closed
        /// With open registration: a sendmail-compatible program that mails each registrant their code. Without
        /// one, only a development server registers, writing the codes to its log.
        public var mailCommand: String?
        /// The `From:` of registration mails (default: `Gotchu ledger <gotchu@THIS-HOST>`).
        public var mailFrom: String?
        /// How long an access token is valid.
        public var accessTokenLifetime: Duration = .seconds(900)
        /// The HS256 secret of the tokens, at least 32 bytes. Without one a development server generates one and
        /// keeps it in ``developmentSecretFile``; any other server refuses to start.
        public var jwtSecret: String?
        /// Where a development server keeps its generated secret, so that it survives restarts and replicas on one
        /// machine share it.
        public var developmentSecretFile: URL?
        /// Serves HTTPS with this PEM certificate chain (the server's certificate first); needs ``tlsKeyFile``.
        public var tlsCertificateFile: String?
        /// The PEM private key of ``tlsCertificateFile``.
        public var tlsKeyFile: String?
        /// The address payers' phones reach the ledger at: the base of its web checkout and QR codes; none when
        /// `nil`.
        public var publicURL: PublicURL?
        /// The web checkout's settings.
        public var checkout = CheckoutSettings()
        /// Also accepts the access tokens of this external issuer, its users provisioned on first use.
        public var identities: OIDCVerifier.Configuration?
        /// The rate and connection limits.
        public var limits = LedgerLimits()
        /// How many connections the store may hold open (a PostgreSQL pool's size), counted in the open-file limit
        /// the server needs.
        public var storeConnections = 20
        /// How webhooks are registered and delivered.
        public var webhooks = WebhookOptions()
        /// Parts made beforehand instead of from the settings above; the server makes what is missing.
        package var made = Made()

        /// The defaults of `gotchu server`.
        public init() {}

        /// Parts of a server made by its caller: a token authority or an issuer on a test clock, a mail box, TLS
        /// made in memory, metrics the caller reads.
        package struct Made: Sendable {
            /// Issues and checks the access tokens, instead of one made from ``Configuration/jwtSecret``.
            package var tokens: TokenAuthority?
            /// Checks the external issuer's tokens, instead of one made from ``Configuration/identities``.
            package var identities: OIDCVerifier?
            /// Mails registrants their codes, instead of ``Configuration/mailCommand``.
            package var mailer: (any RegistrationMailer)?
            /// Counts what the server does and serves it at `GET /metrics`. ``LedgerServer/run(_:store:services:logger:onListening:)``
            /// makes one when there is none; a server in this process has none unless given one.
            package var metrics: LedgerMetrics?
            /// Serves HTTPS, instead of ``Configuration/tlsCertificateFile`` and ``Configuration/tlsKeyFile``.
            package var tls: TLSConfiguration?

            package init() {}
        }

        /// A server for this process's own use (the demo, the simulator, tests and benchmarks): development mode,
        /// no rate limits, a free loopback port, and `tokens` (or a secret of its own), then `adjust`ed.
        package static func inProcess(
            tokens: TokenAuthority? = nil,
            _ adjust: (inout Configuration) -> Void = { _ in }
        ) -> Configuration {
            var configuration = Configuration()
            configuration.port = 0
            configuration.developmentMode = true
            configuration.limits = .unlimited
            configuration.made.tokens = tokens
            if tokens == nil {
                var generator = SystemRandomNumberGenerator()
                configuration.jwtSecret = String(
                    (0..<48).map { _ in "0123456789abcdef".randomElement(using: &generator)! }
                )
            }
            adjust(&configuration)
            return configuration
        }
    }

    /// A configuration's parts, made.
    struct Assembled: Sendable {
        var tokens: TokenAuthority
        var identities: OIDCVerifier?
        var mailer: (any RegistrationMailer)?
        var metrics: LedgerMetrics?
        var tls: TLSConfiguration?

        /// Makes what `configuration` names and its caller did not make.
        init(_ configuration: Configuration, logger: Logger) async throws(SetupError) {
            let made = configuration.made
            if let tokens = made.tokens {
                self.tokens = tokens
            } else {
                do {
                    tokens = try await TokenAuthority(
                        secret: try LedgerServer.jwtSecret(configuration),
                        lifetime: configuration.accessTokenLifetime
                    )
                } catch let error as SetupError {
                    throw error
                } catch {
                    throw SetupError("cannot use the JWT secret: \(error)")
                }
            }
            identities = made.identities ?? configuration.identities.map { OIDCVerifier($0) }
            mailer = made.mailer ?? LedgerServer.registrationMailer(configuration, logger: logger)
            metrics = made.metrics
            tls = made.tls
            if tls == nil, let certificate = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile {
                do {
                    tls = try LedgerServer.tlsConfiguration(certificateFile: certificate, keyFile: key)
                } catch {
                    throw SetupError(error.description)
                }
            }
        }
    }

    /// Why a server cannot start: no usable JWT secret, or a certificate or key that cannot be used.
    public struct SetupError: Error, CustomStringConvertible, Sendable {
        /// The whole message.
        public var description: String

        init(_ description: String) { self.description = description }
    }

    /// Builds the server `configuration` describes over `store` and serves until SIGTERM or SIGINT, after the
    /// requests in flight. The store is migrated before the server listens; `services` (what the store needs
    /// running, such as a PostgreSQL pool) run beside it. Metrics are served at `GET /metrics`. Under systemd
    /// (`Type=notify`) the server reports itself ready once it listens, and stopping when it stops.
    /// - Parameter onListening: called with the server's URL (`http://HOST:PORT`, the bound port) once it listens.
    /// - Throws: ``SetupError`` before it listens when the secret, the certificate or the key cannot be used.
    public static func run(
        _ configuration: Configuration,
        store: any LedgerStore,
        services: [any Service],
        logger: Logger,
        onListening: @escaping @Sendable (_ url: String) async -> Void = { _ in }
    ) async throws {
        warnIfDescriptorsShort(configuration, logger: logger)
        if let publicURL = configuration.publicURL, !publicURL.isHTTPS, !publicURL.isLoopback {
            logger.warning(
                "the public URL is plain http: payers' passwords and payments would cross the network unencrypted",
                metadata: ["public_url": "\(publicURL)"]
            )
        }
        if configuration.identities != nil, configuration.publicURL == nil {
            logger.notice(
                """
                without a public URL the issuer cannot send browsers back to the web checkout: sign-in through it \
                is offered only to browsers on this machine (or on a development server)
                """
            )
        }
        var configuration = configuration
        if configuration.made.metrics == nil { configuration.made.metrics = LedgerMetrics() }
        let scheme = configuration.made.tls != nil || configuration.tlsCertificateFile != nil ? "https" : "http"
        let host = configuration.host
        // Under systemd (Type=notify) readiness is the port listening, not the process having started.
        let notifier = SystemdNotifier(logger: logger)
        let application = try await self.application(
            store: store,
            configuration,
            services: services,
            logger: logger
        ) { port in
            await onListening("\(scheme)://\(host):\(port)")
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

    /// The JWT secret: the configured one, or (in development mode only) one generated and kept in the
    /// configuration's ``Configuration/developmentSecretFile``.
    static func jwtSecret(_ configuration: Configuration) throws(SetupError) -> String {
        if let secret = configuration.jwtSecret {
            guard secret.utf8.count >= 32 else { throw SetupError("the JWT secret must be at least 32 bytes") }
            return secret
        }
        guard configuration.developmentMode, let file = configuration.developmentSecretFile else {
            throw SetupError("a JWT secret is required: pass --jwt-secret or set GOTCHU_JWT_SECRET (or use --dev)")
        }
        if let existing = try? String(contentsOf: file, encoding: .utf8), existing.utf8.count >= 32 { return existing }
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        do {
            try PrivateFile.write(Data(secret.utf8), to: file)
        } catch {
            throw SetupError(error.description)
        }
        return secret
    }

    /// What mails registrants their codes: the mail command, or on a development server without one the log.
    static func registrationMailer(
        _ configuration: Configuration,
        logger: Logger
    ) -> (any RegistrationMailer)? {
        if let mailCommand = configuration.mailCommand {
            return SendmailCommand(
                path: mailCommand,
                sender: configuration.mailFrom ?? "Gotchu ledger <gotchu@\(ProcessInfo.processInfo.hostName)>"
            )
        }
        guard configuration.registration == .open, configuration.developmentMode else { return nil }
        logger.warning("open registration without --mail-command: confirmation codes are written to this log")
        return LoggedRegistrationMailer(logger: logger)
    }

    /// Warns when the open-file limit leaves too little room for the connection cap: past it, accepting fails and
    /// clients wait in the backlog instead of being answered. Room is kept for refusals in progress, the store, the
    /// PostgreSQL pool and the process's own descriptors.
    private static func warnIfDescriptorsShort(_ configuration: Configuration, logger: Logger) {
        var limit = rlimit()
        #if os(Linux)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        // An unlimited limit is the largest value, so it never warns.
        guard getrlimit(resource, &limit) == 0 else { return }
        let maximumOpenConnections = configuration.limits.maximumOpenConnections
        let needed = maximumOpenConnections + 64 + configuration.storeConnections + 64
        guard UInt64(limit.rlim_cur) < UInt64(needed) else { return }
        logger.warning(
            "the open-file limit is below what --max-open-connections needs; raise it (ulimit -n) or lower the cap",
            metadata: [
                "open_file_limit": "\(limit.rlim_cur)", "needed": "\(needed)",
                "max_open_connections": "\(maximumOpenConnections)",
            ]
        )
    }
}
