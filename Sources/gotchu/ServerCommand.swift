import ArgumentParser
import Foundation
import GotchuLedgerServer
import GotchuLedgerStores
import GotchuLogging
import GotchuSettings
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

            Every option below but --config is also a key of the config file (TOML or JSON; --session-lifetime \
            is session_lifetime) and an environment variable (GOTCHU_SERVER_SESSION_LIFETIME). Flags override \
            the environment, which overrides the file, which overrides the built-in values. The JWT secret is \
            never read from the file: give it in GOTCHU_SERVER_JWT_SECRET (or GOTCHU_JWT_SECRET), or name a \
            file holding it with jwt_secret_file.

            Examples:
              gotchu server --dev            # dev login and funding enabled
              gotchu server --config /etc/gotchu/server.toml   # deploy/server.toml
              gotchu server --dev --port 0   # any free port; prints "listening on ..."
              gotchu admin user add you@example.com --password-stdin   # the first account, then:
              gotchu login --email you@example.com
              gotchu server --tls-cert ledger.pem --tls-key ledger.key ...   # HTTPS
              gotchu server --public-url https://pay.example.com/ ...   # web checkout and QR codes
              gotchu server --registration open --mail-command /usr/sbin/sendmail \\
                --mail-from 'Gotchu <noreply@example.com>' ...   # open registration
              GOTCHU_JWT_SECRET=$(openssl rand -hex 32) \\
                gotchu server --host 0.0.0.0 --database /var/lib/gotchu/ledger.sqlite
              PGPASSWORD=... gotchu server --jwt-secret ... \\
                --database postgres://gotchu@db.internal:5432/gotchu
            """
    )

    private static let settings = LedgerServerSettingsSchema()

    @Option(
        help: ArgumentHelp(
            "Config file, .toml or .json (default: $\(LedgerServerSettingsSchema.configEnvironmentVariable); none "
                + "without it).",
            valueName: "path"
        )
    )
    var config: String?

    // Each setting's option has the name of its property in LedgerServerSettingsSchema, which gives its flag, help
    // and value's name; `LedgerServerSettings(flags:)` reads them, as text, so that a bad value is reported as a bad
    // file value or variable is.
    @Option(help: settings.host.help) var host: String?
    @Option(help: settings.port.help) var port: String?
    @Option(help: settings.tlsCert.help) var tlsCert: String?
    @Option(help: settings.tlsKey.help) var tlsKey: String?
    @Option(name: .customLong("public-url"), help: settings.publicURL.help) var publicURL: String?
    @Option(help: settings.database.help) var database: String?
    @Option(help: settings.maxConnections.help) var maxConnections: String?
    @Option(help: settings.dbConnectionWait.help) var dbConnectionWait: String?
    @Flag(inversion: .prefixedNo, help: settings.dev.help) var dev: Bool?
    @Option(help: settings.registration.help) var registration: String?
    @Option(help: settings.mailCommand.help) var mailCommand: String?
    @Option(help: settings.mailFrom.help) var mailFrom: String?
    @Option(help: settings.bcryptCost.help) var bcryptCost: String?
    @Option(help: settings.minPasswordLength.help) var minPasswordLength: String?
    @Option(help: settings.accessTokenLifetime.help) var accessTokenLifetime: String?
    @Option(help: settings.refreshTokenLifetime.help) var refreshTokenLifetime: String?
    @Option(help: settings.jwtSecret.help) var jwtSecret: String?
    @Option(help: settings.jwtSecretFile.help) var jwtSecretFile: String?
    @Option(help: settings.oidcIssuer.help) var oidcIssuer: String?
    @Option(help: settings.oidcAudience.help) var oidcAudience: String?
    @Option(name: .customLong("oidc-jwks-url"), help: settings.oidcJWKSURL.help) var oidcJWKSURL: String?
    @Option(name: .customLong("oidc-client-id"), help: settings.oidcClientID.help) var oidcClientID: String?
    @Option(help: settings.oidcClientSecret.help) var oidcClientSecret: String?
    @Option(help: settings.oidcClientSecretFile.help) var oidcClientSecretFile: String?
    @Option(help: settings.sessionLifetime.help) var sessionLifetime: String?
    @Option(help: settings.lockLifetime.help) var lockLifetime: String?
    @Option(help: settings.inFlightTimeout.help) var inFlightTimeout: String?
    @Option(help: settings.maxAmount.help) var maxAmount: String?
    @Option(help: settings.maxLocksPerPayer.help) var maxLocksPerPayer: String?
    @Option(help: settings.resolve.help) var resolve: String?
    @Option(help: settings.eidGrace.help) var eidGrace: String?
    @Option(help: settings.locale.help) var locale: String?
    @Option(help: settings.browserSessionLifetime.help) var browserSessionLifetime: String?
    @Option(help: settings.maxOpenConnections.help) var maxOpenConnections: String?
    @Option(help: settings.idleTimeout.help) var idleTimeout: String?
    @Option(help: settings.readTimeout.help) var readTimeout: String?
    @Option(help: settings.maxEventStreams.help) var maxEventStreams: String?
    @Flag(inversion: .prefixedNo, help: settings.trustForwardedFor.help) var trustForwardedFor: Bool?
    @OptionGroup var rateLimits: RateLimitOptions
    @Option(help: settings.webhookRetryBase.help) var webhookRetryBase: String?
    @Option(help: settings.webhookAllowHosts.help) var webhookAllowHosts: String?
    @Option(help: settings.webhookConcurrency.help) var webhookConcurrency: String?
    @Option(help: settings.logLevel.help) var logLevel: String?
    @Option(help: settings.logFormat.help) var logFormat: String?

    /// The settings from the config file, the environment and these options, checked.
    func read(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(SettingsError)
        -> LedgerServer.Settings
    {
        let file =
            config
            ?? environment[LedgerServerSettingsSchema.configEnvironmentVariable].flatMap {
                $0.isEmpty ? nil : $0
            }
        return try LedgerServer.Settings.resolve(
            file: file.map { URL(fileURLWithPath: $0) },
            fileIsExplicit: true,
            environment: environment,
            flags: try LedgerServerSettings(flags: self)
        )
    }

    func validate() throws {
        do {
            _ = try read()
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let settings: LedgerServer.Settings
        do {
            settings = try read()
        } catch {
            throw CLIError(error.description)
        }
        settings.logFormat.bootstrap(level: settings.logLevel)
        let logger = Logger(label: "gotchu.server")
        let database = try settings.database ?? LedgerDatabase.option(LedgerDatabase.defaultPath)
        let opened = try database.open(
            LedgerDatabase.Options(
                policy: settings.policy,
                maximumConnections: settings.server.storeConnections,
                connectionWait: settings.connectionWait,
                logger: logger
            )
        )
        logger.info(
            "ledger database",
            metadata: database.logMetadata.merging(["dev": "\(settings.server.developmentMode)"]) { $1 }
        )
        var configuration = settings.server
        // Replicas on one machine share the generated development secret; elsewhere pass the same secret.
        configuration.developmentSecretFile = database.companionFile(
            pathExtension: "jwt-secret",
            directory: Paths.dataHome
        )
        do {
            try await LedgerServer.run(configuration, store: opened.store, services: opened.services, logger: logger) {
                // Unbuffered, so a parent process reading the pipe sees the line at once.
                StandardOutput.write("listening on \($0)\n")
            }
        } catch let error as LedgerServer.SetupError {
            throw CLIError(error.description)
        }
    }
}
