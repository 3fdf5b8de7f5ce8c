import Foundation
import GotchuKiosk
import GotchuSettings
import Testing

/// The repository's `deploy/` directory.
private let deploy = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("deploy")

/// Keeps the files an operator installs true to the code: the example config parses, and the unit says what the
/// kiosk relies on.
@Suite(.timeLimit(.minutes(10))) struct DeployTests {
    private let exampleConfig = deploy.appendingPathComponent("kiosk.toml")

    @Test func exampleConfigResolvesAsItIs() throws {
        let configuration = try KioskConfiguration.resolve(
            file: exampleConfig,
            fileIsExplicit: true,
            environment: [:],
            flags: KioskSettings()
        )
        #expect(configuration.server.absoluteString == "https://ledger.example.com")
        #expect(configuration.credentials == .apiKeyFile(URL(fileURLWithPath: "/etc/gotchu/api-key")))
        #expect(configuration.file == exampleConfig)
    }

    @Test func exampleConfigShowsEveryKeyWithAValidValue() throws {
        let text = try String(contentsOf: exampleConfig, encoding: .utf8)
        // Uncomment every "# key = value" line: each key must be there, and each example must be a valid value.
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.wholeMatch(of: /# ([a-z_]+ = .*)/).map { String($0.1) } ?? String(line)
        }
        let settings = try KioskSettings.decode(
            Data(uncommented.joined(separator: "\n").utf8),
            file: URL(fileURLWithPath: "/etc/gotchu/kiosk.toml")
        )
        let encoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(settings)) as? [String: Any]
        #expect(Set(encoded?.keys.map { $0 } ?? []) == Set(KioskSettings.keys))
        // Only one credential at a time: check each example on its own.
        let examples: [(WritableKeyPath<KioskSettings, String?>, KioskConfiguration.Credentials)] = [
            (\.apiKeyFile, .apiKeyFile(URL(fileURLWithPath: "/etc/gotchu/api-key"))),
            (\.tokenFile, .tokenFile(URL(fileURLWithPath: "/etc/gotchu/token"))),
            (\.email, .email("terminal@example.com")),
        ]
        for (kept, expected) in examples {
            var one = settings
            for (field, _) in examples where field != kept { one[keyPath: field] = nil }
            let configuration = try KioskConfiguration.resolve(
                file: deploy.appendingPathComponent("absent.toml"),
                fileIsExplicit: false,
                environment: [:],
                flags: one
            )
            #expect(configuration.credentials == expected)
        }
    }

    /// The confinement both services run under.
    private static let hardening = [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectControlGroups=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "LockPersonality=yes",
        "MemoryDenyWriteExecute=yes",
        "SystemCallArchitectures=native",
        "SystemCallFilter=@system-service",
        "CapabilityBoundingSet=",
        "UMask=0077",
        "Type=notify",
        "NotifyAccess=main",
        "Restart=on-failure",
        "WantedBy=multi-user.target",
    ]

    /// The unit's lines, trimmed.
    private func directives(_ unit: String) throws -> Set<String> {
        let text = try String(contentsOf: deploy.appendingPathComponent(unit), encoding: .utf8)
        return Set(text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
    }

    @Test func kioskUnitHasTheDirectivesTheKioskReliesOn() throws {
        let lines = try directives("gotchu-kiosk.service")
        for directive in Self.hardening + [
            "WatchdogSec=30",
            "ExecStart=/usr/local/bin/gotchu-kiosk --config /etc/gotchu/kiosk.toml",
            "User=gotchu",
            "Group=gotchu",
            "StateDirectory=gotchu-kiosk",
            "StateDirectoryMode=0700",
        ] {
            #expect(lines.contains(directive), "deploy/gotchu-kiosk.service lacks \(directive)")
        }
        #expect(lines.contains { $0.hasPrefix("RestartSec=") })
        // The state directory the unit creates is the kiosk's default one.
        #expect(KioskConfiguration.defaults.stateDirectory == "/var/lib/gotchu-kiosk")
    }

    @Test func serverUnitKeepsTheLedgerInItsStateDirectory() throws {
        let lines = try directives("gotchu-server.service")
        for directive in Self.hardening + [
            "User=gotchu-server",
            "Group=gotchu-server",
            "StateDirectory=gotchu-server",
            "StateDirectoryMode=0700",
            "EnvironmentFile=/etc/gotchu/server.env",
            "Environment=GOTCHU_SERVER_DATABASE=/var/lib/gotchu-server/ledger.sqlite",
            "ExecStart=/usr/local/bin/gotchu server --host 127.0.0.1 --port 8080 --database ${GOTCHU_SERVER_DATABASE}",
        ] {
            #expect(lines.contains(directive), "deploy/gotchu-server.service lacks \(directive)")
        }
    }

    @Test func sysusersDeclaresEveryUnitsUser() throws {
        let declared = try directives("gotchu.sysusers").filter { $0.hasPrefix("u ") }.map {
            $0.split(separator: " ")[1]
        }
        for unit in ["gotchu-kiosk.service", "gotchu-server.service"] {
            let user = try #require(try directives(unit).first { $0.hasPrefix("User=") }).dropFirst("User=".count)
            #expect(declared.contains(user), "deploy/gotchu.sysusers does not create \(user)")
        }
    }
}
