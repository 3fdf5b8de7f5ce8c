import ArgumentParser
import Foundation
import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuKioskCLI
import GotchuSettings
import Testing

/// A directory of config files, removed at the end of the test.
private final class ConfigDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("kiosk-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func write(_ name: String, _ contents: String) throws -> URL {
        let file = url.appendingPathComponent(name)
        try Data(contents.utf8).write(to: file)
        return file
    }

    var missing: URL { url.appendingPathComponent("absent.toml") }
}

private func resolve(
    file: URL,
    explicit: Bool = true,
    environment: [String: String] = [:],
    flags: KioskSettings = KioskSettings()
) throws(KioskConfigurationError) -> KioskConfiguration {
    try KioskConfiguration.resolve(file: file, fileIsExplicit: explicit, environment: environment, flags: flags)
}

/// The message of the error `body` throws, or `nil` when it throws none.
private func message(_ body: () throws(KioskConfigurationError) -> KioskConfiguration) -> String? {
    do {
        _ = try body()
        return nil
    } catch {
        return error.description
    }
}

private let minimalEnvironment = [
    "GOTCHU_KIOSK_SERVER": "http://ledger.test", "GOTCHU_KIOSK_EMAIL": "kiosk@example.com",
]

@Suite(.timeLimit(.minutes(10))) struct KioskConfigurationTests {
    @Test func defaultsFillEverythingButServerAndCredentials() throws {
        let directory = try ConfigDirectory()
        let configuration = try resolve(file: directory.missing, explicit: false, environment: minimalEnvironment)
        #expect(configuration.server == URL(string: "http://ledger.test")!)
        #expect(configuration.credentials == .email("kiosk@example.com"))
        #expect(configuration.payeeName == "Gotchu")
        #expect(configuration.radio == .bluez)
        #expect(configuration.bluezBus == .system)
        #expect(configuration.adapter == nil)
        #expect(configuration.advertisingType == .broadcast)
        #expect(configuration.serviceUUID == BluetoothUUID("feed"))
        #expect(configuration.air == nil)
        #expect(configuration.sessionLifetime == .seconds(300))
        #expect(configuration.renewExpiredSessions)
        #expect(configuration.stateDirectory.path == "/var/lib/gotchu-kiosk")
        #expect(configuration.display == KioskConfiguration.DisplayAddress(host: "127.0.0.1", port: 8090))
        #expect(configuration.controlBus == .system)
        #expect(configuration.file == nil)
    }

    @Test func eachLayerOverridesTheOneBelow() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(
            "kiosk.toml",
            """
            server = "http://file.test"
            email = "file@example.com"
            payee_name = "From the file"
            adapter = "hci1"
            session_lifetime = 120
            display = "0.0.0.0:9000"
            """
        )
        let fileOnly = try resolve(file: file)
        #expect(fileOnly.server.absoluteString == "http://file.test")
        #expect(fileOnly.payeeName == "From the file")
        #expect(fileOnly.adapter == "hci1")
        #expect(fileOnly.sessionLifetime == .seconds(120))
        #expect(fileOnly.display == KioskConfiguration.DisplayAddress(host: "0.0.0.0", port: 9000))
        #expect(fileOnly.radio == .bluez)
        #expect(fileOnly.file == file)

        let environment = [
            "GOTCHU_KIOSK_SERVER": "https://environment.test",
            "GOTCHU_KIOSK_SESSION_LIFETIME": "60",
            "GOTCHU_KIOSK_RADIO": "sim",
            "GOTCHU_KIOSK_ADAPTER": "",  // empty: unset, the file's stands
            "PATH": "/usr/bin",
        ]
        let withEnvironment = try resolve(file: file, environment: environment)
        #expect(withEnvironment.server.absoluteString == "https://environment.test")
        #expect(withEnvironment.sessionLifetime == .seconds(60))
        #expect(withEnvironment.radio == .sim)
        #expect(withEnvironment.adapter == "hci1")
        #expect(withEnvironment.payeeName == "From the file")

        let flags = KioskSettings {
            $0.server = "http://flags.test:8080"
            $0.sessionLifetime = 30
            $0.display = "off"
        }
        let all = try resolve(file: file, environment: environment, flags: flags)
        #expect(all.server.absoluteString == "http://flags.test:8080")
        #expect(all.sessionLifetime == .seconds(30))
        #expect(all.display == nil)
        #expect(all.radio == .sim)
        #expect(all.payeeName == "From the file")
    }

    @Test func tomlFileWithEveryKey() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(
            "kiosk.toml",
            """
            # a comment
            server = "https://ledger.example.com"
            token_file = "token"
            ca_file = "ca.pem"
            payee_name = "Café Bob"
            radio = "sim"
            bluez_bus = "unix:path=/tmp/bus"
            adapter = "hci0"
            service_uuid = "0000FEED-0000-1000-8000-00805F9B34FB"
            air = "/run/air"
            session_lifetime = 3600
            renew_expired_sessions = false
            state_directory = "state"
            display = "[::1]:8081"
            control_bus = "session"
            """
        )
        let configuration = try resolve(file: file)
        #expect(configuration.server.absoluteString == "https://ledger.example.com")
        #expect(
            configuration.credentials == .tokenFile(directory.url.appendingPathComponent("token").standardizedFileURL)
        )
        #expect(configuration.caFile == directory.url.appendingPathComponent("ca.pem").standardizedFileURL)
        #expect(configuration.payeeName == "Café Bob")
        #expect(configuration.radio == .sim)
        #expect(configuration.bluezBus == .address("unix:path=/tmp/bus"))
        #expect(configuration.serviceUUID == BluetoothUUID.gotchu)
        #expect(configuration.air?.path == "/run/air")
        #expect(configuration.sessionLifetime == .seconds(3600))
        #expect(!configuration.renewExpiredSessions)
        // Relative paths in a file are relative to the file.
        #expect(
            configuration.stateDirectory.path == directory.url.appendingPathComponent("state").standardizedFileURL.path
        )
        #expect(configuration.display == KioskConfiguration.DisplayAddress(host: "::1", port: 8081))
        #expect(configuration.display?.description == "[::1]:8081")
        #expect(configuration.controlBus == .session)
    }

    @Test func jsonFile() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(
            "kiosk.json",
            """
            {"server": "http://127.0.0.1:8080", "email": "bob@example.com", "session_lifetime": 90,
             "renew_expired_sessions": false, "adapter": null}
            """
        )
        let configuration = try resolve(file: file)
        #expect(configuration.server.absoluteString == "http://127.0.0.1:8080")
        #expect(configuration.credentials == .email("bob@example.com"))
        #expect(configuration.sessionLifetime == .seconds(90))
        #expect(!configuration.renewExpiredSessions)
        #expect(configuration.adapter == nil)
    }

    @Test(arguments: ["kiosk.toml", "kiosk.json"])
    func unknownKeyIsNamed(name: String) throws {
        let directory = try ConfigDirectory()
        let contents =
            name.hasSuffix(".toml")
            ? "server = \"http://a.test\"\nemail = \"a@b.c\"\nsevrer = \"http://typo.test\"\n"
            : #"{"server": "http://a.test", "email": "a@b.c", "sevrer": "http://typo.test"}"#
        let file = try directory.write(name, contents)
        let text = try #require(message { () throws(KioskConfigurationError) in try resolve(file: file) })
        #expect(text.contains("\"sevrer\""))
        #expect(text.contains(file.path))
    }

    @Test func unknownTableIsNamed() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(
            "kiosk.toml",
            "server = \"http://a.test\"\n[radio_settings]\nadapter = \"hci0\"\n"
        )
        let text = try #require(message { () throws(KioskConfigurationError) in try resolve(file: file) })
        #expect(text.contains("\"radio_settings\""))
    }

    @Test(
        arguments: [
            ("kiosk.toml", "session_lifetime = \"300\"", "session_lifetime"),
            ("kiosk.toml", "renew_expired_sessions = \"yes\"", "renew_expired_sessions"),
            ("kiosk.toml", "server = 8080", "server"),
            ("kiosk.toml", "display = 8080", "display"),
            ("kiosk.toml", "session_lifetime = 2.5", "session_lifetime"),
            ("kiosk.json", #"{"session_lifetime": "300"}"#, "session_lifetime"),
            ("kiosk.json", #"{"email": ["a@b.c"]}"#, "email"),
        ]
    )
    func wrongTypeNamesKeyAndFile(name: String, contents: String, key: String) throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(name, contents)
        let text = try #require(
            message { () throws(KioskConfigurationError) in try resolve(file: file, environment: minimalEnvironment) }
        )
        #expect(text.contains(key), "\(text)")
        #expect(text.contains(file.path), "\(text)")
        #expect(text.contains("must be"), "\(text)")
    }

    @Test func unparsableFilesAreReported() throws {
        let directory = try ConfigDirectory()
        let toml = try directory.write("kiosk.toml", "server = \"http://a.test\nemail = 3\n")
        let tomlError = try #require(message { () throws(KioskConfigurationError) in try resolve(file: toml) })
        #expect(tomlError.contains("not valid TOML") && tomlError.contains("line 1"), "\(tomlError)")
        let json = try directory.write("kiosk.json", "{\"server\": ")
        let jsonError = try #require(message { () throws(KioskConfigurationError) in try resolve(file: json) })
        #expect(jsonError.contains("not valid JSON"), "\(jsonError)")
        let yaml = try directory.write("kiosk.yaml", "server: x")
        let yamlError = try #require(message { () throws(KioskConfigurationError) in try resolve(file: yaml) })
        #expect(yamlError.contains(".toml or .json"), "\(yamlError)")
    }

    @Test(
        arguments: [
            ("GOTCHU_KIOSK_SESSION_LIFETIME", "five minutes"),
            ("GOTCHU_KIOSK_SESSION_LIFETIME", "0"),
            ("GOTCHU_KIOSK_SESSION_LIFETIME", "3601"),
            ("GOTCHU_KIOSK_RENEW_EXPIRED_SESSIONS", "maybe"),
            ("GOTCHU_KIOSK_RADIO", "wifi"),
            ("GOTCHU_KIOSK_DISPLAY", "localhost"),
            ("GOTCHU_KIOSK_DISPLAY", "127.0.0.1:65536"),
            ("GOTCHU_KIOSK_DISPLAY", "::1:8080"),
            ("GOTCHU_KIOSK_DISPLAY", ":8080"),
            ("GOTCHU_KIOSK_SERVER", "ledger.example.com"),
            ("GOTCHU_KIOSK_SERVER", "ftp://ledger.example.com"),
            ("GOTCHU_KIOSK_SERVICE_UUID", "fee"),
            ("GOTCHU_KIOSK_BLUEZ_BUS", "systemd"),
            ("GOTCHU_KIOSK_CONTROL_BUS", "sesion"),
            ("GOTCHU_KIOSK_ADAPTER", "hci0/dev"),
            ("GOTCHU_KIOSK_EMAIL", "kiosk"),
            ("GOTCHU_KIOSK_PAYEE_NAME", "   "),
            ("GOTCHU_KIOSK_SEVRER", "http://typo.test"),
        ]
    )
    func badEnvironmentValueIsNamed(variable: String, value: String) throws {
        let directory = try ConfigDirectory()
        var environment = minimalEnvironment
        environment[variable] = value
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(file: directory.missing, explicit: false, environment: environment)
            }
        )
        #expect(text.hasPrefix(variable), "\(text)")
    }

    @Test func goodEnvironmentValuesParse() throws {
        let directory = try ConfigDirectory()
        var environment = minimalEnvironment
        environment["GOTCHU_KIOSK_RENEW_EXPIRED_SESSIONS"] = "no"
        environment["GOTCHU_KIOSK_DISPLAY"] = "[::]:0"
        environment["GOTCHU_KIOSK_CONTROL_BUS"] = "unix:abstract=kiosk"
        environment["GOTCHU_KIOSK_SERVICE_UUID"] = "6e400001-b5a3-f393-e0a9-e50e24dcca9e"
        let configuration = try resolve(file: directory.missing, explicit: false, environment: environment)
        #expect(!configuration.renewExpiredSessions)
        #expect(configuration.display == KioskConfiguration.DisplayAddress(host: "::", port: 0))
        #expect(configuration.controlBus == .address("unix:abstract=kiosk"))
        #expect(configuration.serviceUUID.uuidString == "6e400001-b5a3-f393-e0a9-e50e24dcca9e")
    }

    @Test func badFlagIsNamedAsAFlag() throws {
        let directory = try ConfigDirectory()
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(
                    file: directory.missing,
                    explicit: false,
                    environment: minimalEnvironment,
                    flags: KioskSettings { $0.sessionLifetime = -1 }
                )
            }
        )
        #expect(text.hasPrefix("--session-lifetime"), "\(text)")
    }

    @Test func rotationIsEveryMinuteByDefaultZeroTurnsItOffAndTooOftenIsRefused() throws {
        let directory = try ConfigDirectory()
        let defaults = try resolve(file: directory.missing, explicit: false, environment: minimalEnvironment)
        #expect(defaults.rotateEvery == .seconds(60))
        var environment = minimalEnvironment
        environment["GOTCHU_KIOSK_ROTATE_EVERY"] = "0"
        #expect(try resolve(file: directory.missing, explicit: false, environment: environment).rotateEvery == nil)
        let flagged = try resolve(
            file: directory.missing,
            explicit: false,
            environment: minimalEnvironment,
            flags: KioskSettings { $0.rotateEvery = 30 }
        )
        #expect(flagged.rotateEvery == .seconds(30))
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(
                    file: directory.missing,
                    explicit: false,
                    environment: minimalEnvironment,
                    flags: KioskSettings { $0.rotateEvery = 2 }
                )
            }
        )
        #expect(text.hasPrefix("--rotate-every") && text.contains("0 (never) or 5 to"), "\(text)")
    }

    @Test func missingExplicitFileIsAnError() throws {
        let directory = try ConfigDirectory()
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(file: directory.missing, explicit: true, environment: minimalEnvironment)
            }
        )
        #expect(text.contains(directory.missing.path) && text.contains("does not exist"), "\(text)")
    }

    @Test func missingDefaultFileIsFine() throws {
        let directory = try ConfigDirectory()
        let configuration = try resolve(file: directory.missing, explicit: false, environment: minimalEnvironment)
        #expect(configuration.file == nil)
    }

    @Test func directoryAsFileIsAnError() throws {
        let directory = try ConfigDirectory()
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(file: directory.url, explicit: false, environment: minimalEnvironment)
            }
        )
        #expect(text.contains("not a regular file"), "\(text)")
    }

    @Test func missingServerSaysWhereToSetIt() throws {
        let directory = try ConfigDirectory()
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(file: directory.missing, explicit: false, environment: ["GOTCHU_KIOSK_EMAIL": "a@b.c"])
            }
        )
        #expect(text.contains("server = \"https://…\" in \(directory.missing.path)"), "\(text)")
        #expect(text.contains("GOTCHU_KIOSK_SERVER") && text.contains("--server"), "\(text)")
    }

    @Test func neitherCredentialIsAnError() throws {
        let directory = try ConfigDirectory()
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(
                    file: directory.missing,
                    explicit: false,
                    environment: ["GOTCHU_KIOSK_SERVER": "http://a.test"]
                )
            }
        )
        #expect(text.contains("email") && text.contains("token_file") && text.contains("api_key_file"), "\(text)")
    }

    @Test func bothCredentialsInOneLayerIsAnError() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(
            "kiosk.toml",
            "server = \"http://a.test\"\nemail = \"a@b.c\"\ntoken_file = \"/etc/gotchu/token\"\n"
        )
        let text = try #require(message { () throws(KioskConfigurationError) in try resolve(file: file) })
        #expect(text.contains("both") && text.contains("email in \(file.path)"), "\(text)")

        let flags = KioskSettings {
            $0.email = "a@b.c"
            $0.tokenFile = "/token"
        }
        let flagText = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(file: directory.missing, explicit: false, environment: minimalEnvironment, flags: flags)
            }
        )
        #expect(flagText.contains("--email") && flagText.contains("--token-file"), "\(flagText)")
    }

    @Test func apiKeyFileIsACredentialTakenFromTheFilesDirectory() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write("kiosk.toml", "server = \"http://a.test\"\napi_key_file = \"api-key\"\n")
        let configuration = try resolve(file: file)
        #expect(
            configuration.credentials
                == .apiKeyFile(directory.url.appendingPathComponent("api-key").standardizedFileURL)
        )
        // A higher layer's key replaces the file's; a layer naming a key and another credential is refused.
        let flagged = try resolve(file: file, flags: KioskSettings { $0.email = "a@b.c" })
        #expect(flagged.credentials == .email("a@b.c"))
        let text = try #require(
            message { () throws(KioskConfigurationError) in
                try resolve(
                    file: directory.missing,
                    explicit: false,
                    environment: minimalEnvironment,
                    flags: KioskSettings {
                        $0.email = "a@b.c"
                        $0.tokenFile = "/t"
                        $0.apiKeyFile = "/k"
                    }
                )
            }
        )
        #expect(
            text.contains("--email, --token-file and --api-key-file are set") && text.contains("set only one"),
            "\(text)"
        )
    }

    @Test func aHigherLayersCredentialReplacesALowerOnes() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write("kiosk.toml", "server = \"http://a.test\"\nemail = \"a@b.c\"\n")
        let configuration = try resolve(file: file, flags: KioskSettings { $0.tokenFile = "/run/token" })
        #expect(configuration.credentials == .tokenFile(URL(fileURLWithPath: "/run/token")))
    }

    @Test func advertiseAsIsBroadcastUnlessAFixedTerminalChoosesPeripheral() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(
            "kiosk.toml",
            "server = \"https://a.test\"\nemail = \"a@b.c\"\nadvertise_as = \"peripheral\"\n"
        )
        #expect(try resolve(file: file).advertisingType == .peripheral)
        let fromEnvironment = try resolve(file: file, environment: ["GOTCHU_KIOSK_ADVERTISE_AS": "broadcast"])
        #expect(fromEnvironment.advertisingType == .broadcast)
        let fromFlags = try resolve(
            file: file,
            environment: ["GOTCHU_KIOSK_ADVERTISE_AS": "broadcast"],
            flags: KioskSettings { $0.advertiseAs = "peripheral" }
        )
        #expect(fromFlags.advertisingType == .peripheral)
        let wrong = message { () throws(KioskConfigurationError) in
            try resolve(file: file, environment: ["GOTCHU_KIOSK_ADVERTISE_AS": "public"])
        }
        #expect(wrong?.hasPrefix("GOTCHU_KIOSK_ADVERTISE_AS: must be \"broadcast\"") == true, "\(wrong ?? "accepted")")
        #expect(wrong?.contains("\"public\"") == true)
    }

    @Test func settingsRoundTripThroughJSONWithSnakeCaseKeys() throws {
        let settings = KioskSettings {
            $0.server = "http://a.test"
            $0.tokenFile = "/t"
            $0.sessionLifetime = 5
            $0.renewExpiredSessions = false
        }
        let data = try JSONEncoder().encode(settings)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Set(object.keys) == ["server", "token_file", "session_lifetime", "renew_expired_sessions"])
        #expect(try JSONDecoder().decode(KioskSettings.self, from: data) == settings)
        #expect(KioskSettings.keys.count == 22)
    }

    @Test func caFileFromTheEnvironmentAndFlagsIsTakenFromTheWorkingDirectory() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write("kiosk.toml", "server = \"https://a.test\"\nemail = \"a@b.c\"\n")
        let working = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        #expect(try resolve(file: file).caFile == nil)
        let fromEnvironment = try resolve(file: file, environment: ["GOTCHU_KIOSK_CA_FILE": "env-ca.pem"])
        #expect(fromEnvironment.caFile == working.appendingPathComponent("env-ca.pem").standardizedFileURL)
        let fromFlags = try resolve(
            file: file,
            environment: ["GOTCHU_KIOSK_CA_FILE": "env-ca.pem"],
            flags: KioskSettings { $0.caFile = "/etc/gotchu/ca.pem" }
        )
        #expect(fromFlags.caFile == URL(fileURLWithPath: "/etc/gotchu/ca.pem"))
        let empty = message { () throws(KioskConfigurationError) in
            try resolve(file: file, flags: KioskSettings { $0.caFile = "" })
        }
        #expect(empty?.contains("--ca-file") == true, "\(empty ?? "accepted")")
    }
}

/// The command line offers a flag for every declared setting, with the declaration's name, and no other.
@Suite(.timeLimit(.minutes(10))) struct KioskCommandLineTests {
    @Test(arguments: KioskSettings.declarations.map(\.key))
    func everyDeclaredSettingHasItsFlag(key: String) throws {
        let declaration = try #require(KioskSettings.declarations.first { $0.key == key })
        switch declaration.kind {
        case .flag:
            _ = try KioskOptions.parse([declaration.flag])
            _ = try KioskOptions.parse(["--no-" + declaration.flag.dropFirst(2)])
        case .integer, .number:
            _ = try KioskOptions.parse([declaration.flag, "30"])
        case .text:
            _ = try KioskOptions.parse([declaration.flag, "value"])
        case .integers:
            _ = try KioskOptions.parse([declaration.flag, "10,15"])
        }
    }

    @Test func anUndeclaredFlagIsRefused() {
        #expect(throws: (any Error).self) { try KioskOptions.parse(["--session-lifetimes", "30"]) }
    }

    /// A value is checked the same way whichever layer it comes from, and the error names that layer's spelling.
    @Test func aBadValueIsNamedAsTheOperatorWroteIt() throws {
        let expected = "must be a whole number of seconds, 0 (never) or 5 to 3600, got \"x\""
        do {
            _ = try KioskSettings(flags: try KioskOptions.parse(["--rotate-every", "x"]))
            Issue.record("--rotate-every x was accepted")
        } catch let error as SettingsError {
            #expect(error.description == "--rotate-every: " + expected)
        }
        let directory = try ConfigDirectory()
        var environment = minimalEnvironment
        environment["GOTCHU_KIOSK_ROTATE_EVERY"] = "x"
        let text = message { () throws(KioskConfigurationError) in
            try resolve(file: directory.missing, explicit: false, environment: environment)
        }
        #expect(text == "GOTCHU_KIOSK_ROTATE_EVERY: " + expected)
        let file = try directory.write("kiosk.toml", "rotate_every = 3\n")
        let fromFile = message { () throws(KioskConfigurationError) in
            try resolve(file: file, environment: minimalEnvironment)
        }
        #expect(
            fromFile == "rotate_every in \(file.path): must be a whole number of seconds, 0 (never) or 5 to 3600, got 3"
        )
    }

    /// The options parsed from a command line are the flags' layer: over the environment, which is over the file.
    @Test func parsedFlagsOverrideTheEnvironmentWhichOverridesTheFile() throws {
        let directory = try ConfigDirectory()
        let file = try directory.write(
            "kiosk.toml",
            "server = \"http://a.test\"\nemail = \"a@b.c\"\nrotate_every = 10\nsession_lifetime = 100\n"
        )
        let environment = ["GOTCHU_KIOSK_ROTATE_EVERY": "20", "GOTCHU_KIOSK_SESSION_LIFETIME": "200"]
        let flags = try KioskSettings(
            flags: try KioskOptions.parse([
                "--rotate-every", "30", "--no-renew-expired-sessions", "--calibrated-rssi", "-59",
            ])
        )
        #expect(flags.rotateEvery == 30 && flags.renewExpiredSessions == false && flags.sessionLifetime == nil)
        let configuration = try resolve(file: file, environment: environment, flags: flags)
        #expect(configuration.rotateEvery == .seconds(30))
        #expect(configuration.sessionLifetime == .seconds(200))
        #expect(!configuration.renewExpiredSessions)
        #expect(configuration.calibratedRSSI == -59)
        #expect(try resolve(file: file).rotateEvery == .seconds(10))
    }
}
