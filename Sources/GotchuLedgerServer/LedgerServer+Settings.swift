package import Foundation
import GotchuCheckout
package import GotchuLedger
package import GotchuLedgerStores
package import GotchuLogging
import GotchuOIDC
package import GotchuSettings
import GotchuWebhooks
package import Logging

extension LedgerServer {
    /// `gotchu server`'s settings, read from the config file, the environment and the command line
    /// (``LedgerServerSettingsSchema``) and checked: everything the server is started with but its store.
    package struct Settings {
        /// The server's configuration, but for its development secret's file (which depends on the database).
        package var server = LedgerServer.Configuration()
        /// The ledger's rules.
        package var policy = LedgerPolicy()
        /// The database; `nil` for the default SQLite file.
        package var database: LedgerDatabase?
        /// PostgreSQL only: how long a request waits for a connection.
        package var connectionWait: Duration
        /// The log's level.
        package var logLevel: Logger.Level
        /// The log's format.
        package var logFormat: LogFormat

        private typealias Schema = LedgerServerSettingsSchema
        private typealias Problem = SettingProblem

        /// Reads the config file (`file`; one the operator named must exist), the environment and the command line's
        /// layer, and checks every setting; a bad one is named as the operator wrote it.
        package static func resolve(
            file: URL?,
            fileIsExplicit: Bool,
            environment: [String: String],
            flags: LedgerServerSettings
        ) throws(SettingsError) -> Settings {
            try Settings(
                SettingsResolution(file: file, fileIsExplicit: fileIsExplicit, environment: environment, flags: flags)
            )
        }

        /// Checks every setting of `settings`; a bad one is named as the operator wrote it.
        package init(_ settings: SettingsResolution<LedgerServerSettingsSchema>) throws(SettingsError) {
            func name<Value>(_ setting: KeyPath<Schema, Setting<Value>>) -> String { Self.name(setting, settings) }

            logLevel = try settings.required(\.logLevel) { text throws(Problem) in Logger.Level(rawValue: text)! }
            logFormat = try settings.required(\.logFormat) { text throws(Problem) in LogFormat(rawValue: text)! }

            server.host = try settings.required(\.host) { text throws(Problem) in
                guard !text.isEmpty, !text.contains(where: \.isWhitespace) else {
                    throw Problem("must be a host name or an address, got \(SettingValue.text(text))")
                }
                return text
            }
            server.port = try settings.required(\.port)
            server.tlsCertificateFile = try settings.value(\.tlsCert) { text, origin throws(Problem) in
                try origin.path(text).path
            }
            server.tlsKeyFile = try settings.value(\.tlsKey) { text, origin throws(Problem) in
                try origin.path(text).path
            }
            guard (server.tlsCertificateFile == nil) == (server.tlsKeyFile == nil) else {
                throw SettingsError(
                    "\(name(\.tlsCert)) and \(name(\.tlsKey)) go together: set both for HTTPS, or neither"
                )
            }

            database = try settings.value(\.database) { text, origin throws(Problem) in
                let database: LedgerDatabase
                do {
                    database = try LedgerDatabase(text)
                } catch {
                    throw Problem("\(error)")
                }
                guard case .sqlite = database else { return database }
                return .sqlite(path: try origin.path(text).path)
            }
            server.storeConnections = try settings.required(\.maxConnections)
            connectionWait = .seconds(try settings.required(\.dbConnectionWait))

            server.developmentMode = try settings.required(\.dev)
            server.publicURL = try settings.value(\.publicURL) { text throws(Problem) in
                do throws(PublicURL.Invalid) {
                    return try PublicURL(text)
                } catch {
                    throw Problem(error.description)
                }
            }
            if let publicURL = server.publicURL, !publicURL.isHTTPS, !publicURL.isLoopback, !server.developmentMode {
                throw SettingsError(
                    "\(name(\.publicURL)) must be https (http only on loopback or with \(name(\.dev))): payers open it on "
                        + "their phones, sign in and pay there, so it must not cross the network unencrypted; "
                        + "got \(publicURL)"
                )
            }
            server.registration = try settings.required(\.registration) { text throws(Problem) in
                Registration(rawValue: text)!
            }
            server.mailCommand = try settings.value(\.mailCommand) { text, origin throws(Problem) in
                let path = try origin.path(text).path
                guard FileManager.default.isExecutableFile(atPath: path) else {
                    throw Problem("\(path) is not an executable file")
                }
                return path
            }
            if server.mailCommand != nil, server.registration != .open {
                throw SettingsError("\(name(\.mailCommand)) is used only with \(name(\.registration)) open")
            }
            if server.registration == .open, server.mailCommand == nil, !server.developmentMode {
                throw SettingsError(
                    "\(name(\.registration)) open needs \(name(\.mailCommand)) PATH, a sendmail-compatible program: each "
                        + "registrant is mailed a code that proves the address is theirs before the account can log in "
                        + "or be paid (only a \(name(\.dev)) server registers without it, writing the codes to its log)"
                )
            }
            server.mailFrom = try settings.value(\.mailFrom) { text throws(Problem) in
                guard !text.contains(where: \.isNewline), text.contains("@") else {
                    throw Problem("must be one line holding an address, such as 'Gotchu <noreply@example.com>'")
                }
                return text
            }

            policy.passwordCost = try settings.required(\.bcryptCost)
            policy.minimumPasswordLength = try settings.required(\.minPasswordLength)
            server.accessTokenLifetime = .seconds(try settings.required(\.accessTokenLifetime))
            policy.refreshTokenLifetime = .seconds(try settings.required(\.refreshTokenLifetime))
            server.jwtSecret = try Self.secret(settings)
            server.identities = try Self.identities(settings)

            policy.sessionLifetime = .seconds(try settings.required(\.sessionLifetime))
            policy.lockLifetime = .seconds(try settings.required(\.lockLifetime))
            policy.inFlightTimeout = .seconds(try settings.required(\.inFlightTimeout))
            policy.maximumAmount = Int64(try settings.required(\.maxAmount))
            policy.maximumLocksPerPayer = try settings.required(\.maxLocksPerPayer)
            policy.eidGrace = .seconds(try settings.required(\.eidGrace))

            server.checkout.locale = try settings.required(\.locale)
            server.checkout.browserSessionLifetime = .seconds(try settings.required(\.browserSessionLifetime))

            var limits = LedgerLimits()
            limits.resolveAccess = try settings.required(\.resolve) { text throws(Problem) in
                ResolveAccess(rawValue: text)!
            }
            limits.maximumOpenConnections = try settings.required(\.maxOpenConnections)
            limits.idleTimeout = .seconds(try settings.required(\.idleTimeout))
            limits.readTimeout = .seconds(try settings.required(\.readTimeout))
            limits.eventStreamsPerUser = try settings.required(\.maxEventStreams)
            limits.trustForwardedFor = try settings.required(\.trustForwardedFor)
            /// A rate of 0 is no limit.
            func rate(
                _ perSecond: KeyPath<Schema, Setting<Double>>,
                _ burst: KeyPath<Schema, Setting<Int>>
            ) throws(SettingsError) -> RateLimit? {
                let rate = try settings.required(perSecond)
                let burst = try settings.required(burst)
                return rate > 0 ? RateLimit(perSecond: rate, burst: burst) : nil
            }
            limits.resolvePerAddress = try rate(\.resolveRate, \.resolveBurst)
            limits.lockPerAddress = try rate(\.lockRate, \.lockBurst)
            limits.lockPerUser = try rate(\.userLockRate, \.userLockBurst)
            limits.sendPerUser = try rate(\.sendRate, \.sendBurst)
            limits.payoutPerUser = try rate(\.payoutRate, \.payoutBurst)
            server.limits = limits

            server.webhooks.retryBase = .seconds(try settings.required(\.webhookRetryBase))
            server.webhooks.concurrencyPerEndpoint = try settings.required(\.webhookConcurrency)
            server.webhooks.allowedHosts =
                try settings.value(\.webhookAllowHosts) { text throws(Problem) in
                    var hosts: [String] = []
                    for entry in text.split(separator: ",") {
                        let host = entry.trimmingCharacters(in: .whitespaces)
                        guard !host.isEmpty else { continue }
                        guard WebhookAddressPolicy.isValidHost(host) else {
                            throw Problem(
                                "must be host names or addresses separated by commas, got \(SettingValue.text(host))"
                            )
                        }
                        hosts.append(host)
                    }
                    return hosts
                } ?? []
        }

        /// The setting as the layer that set it names it, or its flag when none did.
        private static func name<Value>(
            _ setting: KeyPath<Schema, Setting<Value>>,
            _ settings: SettingsResolution<Schema>
        ) -> String {
            guard let layer = settings.layer(of: setting), layer.origin != .defaults else {
                return SettingsResolution<Schema>.declaration(setting).flag
            }
            return settings.name(of: setting, in: layer)
        }

        /// The JWT secret: `jwt_secret` (a flag or a variable; never a file's key) or the contents of `jwt_secret_file`,
        /// whichever the higher layer names; `nil` when neither is set (a development server then generates one).
        private static func secret(_ settings: SettingsResolution<Schema>) throws(SettingsError) -> String? {
            try secret(settings, \.jwtSecret, orFile: \.jwtSecretFile, minimumBytes: 32)
        }

        /// The OpenID Connect client's secret: `oidc_client_secret` (a flag or a variable; never a file's key) or the
        /// contents of `oidc_client_secret_file`, whichever the higher layer names; `nil` when neither is set (a public
        /// client).
        private static func clientSecret(_ settings: SettingsResolution<Schema>) throws(SettingsError) -> String? {
            try secret(settings, \.oidcClientSecret, orFile: \.oidcClientSecretFile, minimumBytes: 1)
        }

        /// A secret given as itself (`value`) or as a file holding it (`file`), whichever the higher layer names;
        /// both in one layer is refused.
        private static func secret(
            _ settings: SettingsResolution<Schema>,
            _ value: KeyPath<Schema, Setting<String>>,
            orFile file: KeyPath<Schema, Setting<String>>,
            minimumBytes: Int
        ) throws(SettingsError) -> String? {
            func rank(_ layer: SettingsResolution<Schema>.Layer) -> Int {
                settings.layers.firstIndex { $0.origin == layer.origin } ?? settings.layers.count
            }
            if let valueLayer = settings.layer(of: value), let fileLayer = settings.layer(of: file) {
                guard rank(valueLayer) != rank(fileLayer) else {
                    throw SettingsError(
                        "both \(settings.name(of: value, in: valueLayer)) and "
                            + "\(settings.name(of: file, in: fileLayer)) are set; set only one"
                    )
                }
                if rank(valueLayer) < rank(fileLayer) { return try settings.value(value) }
            } else if settings.layer(of: value) != nil {
                return try settings.value(value)
            }
            return try settings.value(file) { text, origin throws(Problem) in
                try readSecret(try origin.path(text), minimumBytes: minimumBytes)
            }
        }

        /// The secret a file holds, without its final line break, of at least `minimumBytes`; refused when every user may
        /// read the file.
        private static func readSecret(_ file: URL, minimumBytes: Int) throws(Problem) -> String {
            let permissions: Int
            do {
                let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
                permissions = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
            } catch {
                throw Problem("cannot read \(file.path): \(error.localizedDescription)")
            }
            // Others' read bit (o+r).
            guard permissions & 0o004 == 0 else {
                throw Problem("\(file.path) is readable by every user: keep a secret readable by its owner (chmod o-r)")
            }
            let text: String
            do {
                text = try String(contentsOf: file, encoding: .utf8)
            } catch {
                throw Problem("cannot read \(file.path): \(error.localizedDescription)")
            }
            let secret = text.hasSuffix("\n") ? String(text.dropLast()) : text
            guard secret.utf8.count >= minimumBytes else {
                throw Problem("\(file.path) must hold at least \(minimumBytes) byte\(minimumBytes == 1 ? "" : "s")")
            }
            return secret
        }

        /// The external issuer the settings trust, if any.
        private static func identities(
            _ settings: SettingsResolution<Schema>
        ) throws(SettingsError) -> OIDCVerifier.Configuration? {
            func name<Value>(_ setting: KeyPath<Schema, Setting<Value>>) -> String { Self.name(setting, settings) }
            /// An https URL, or http to this machine only.
            func trustworthy(_ text: String) throws(Problem) -> URL {
                guard let url = URL(string: text), OIDCVerifier.isTrustworthy(url) else {
                    throw Problem("must be an https URL (http only on loopback), got \(SettingValue.text(text))")
                }
                return url
            }
            let jwksURL = try settings.value(\.oidcJWKSURL, trustworthy)
            let audience = try settings.value(\.oidcAudience)
            let clientID = try settings.value(\.oidcClientID) { text throws(Problem) in
                guard (1...255).contains(text.utf8.count), text.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                    throw Problem("must be 1 to 255 visible ASCII characters, got \(SettingValue.text(text))")
                }
                return text
            }
            let clientSecret = try clientSecret(settings)
            guard
                let issuer = try settings.value(
                    \.oidcIssuer,
                    { text throws(Problem) in
                        _ = try trustworthy(text)
                        return text
                    }
                )
            else {
                guard audience == nil, jwksURL == nil else {
                    throw SettingsError("\(name(\.oidcAudience)) and \(name(\.oidcJWKSURL)) need \(name(\.oidcIssuer))")
                }
                guard clientID == nil, clientSecret == nil else {
                    throw SettingsError(
                        "\(name(\.oidcClientID)) and the client secret are the issuer's: they need \(name(\.oidcIssuer))"
                    )
                }
                return nil
            }
            guard let audience, !audience.isEmpty else {
                throw SettingsError(
                    "\(name(\.oidcIssuer)) needs \(name(\.oidcAudience)) (the aud its tokens name for this ledger)"
                )
            }
            var configuration = OIDCVerifier.Configuration(issuer: issuer, audience: audience)
            configuration.jwksURL = jwksURL
            configuration.clientID = clientID
            configuration.clientSecret = clientSecret
            return configuration
        }
    }
}
