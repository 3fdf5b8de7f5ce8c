import Foundation
import GotchuKiosk
import Testing

/// The repository's `deploy/` directory.
private let deploy = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("deploy")

/// Keeps the files an operator installs true to the code: the example config parses, and the unit says what the
/// kiosk relies on.
@Suite struct DeployTests {
    private let exampleConfig = deploy.appendingPathComponent("kiosk.toml")

    @Test func exampleConfigResolvesAsItIs() throws {
        let configuration = try KioskConfiguration.resolve(
            file: exampleConfig,
            fileIsExplicit: true,
            environment: [:],
            flags: KioskSettings()
        )
        #expect(configuration.server.absoluteString == "https://ledger.example.com")
        #expect(configuration.credentials == .email("terminal@example.com"))
        #expect(configuration.file == exampleConfig)
    }

    @Test func exampleConfigShowsEveryKeyWithAValidValue() throws {
        let text = try String(contentsOf: exampleConfig, encoding: .utf8)
        // Uncomment every "# key = value" line: each key must be there, and each example must be a valid value.
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.wholeMatch(of: /# ([a-z_]+ = .*)/).map { String($0.1) } ?? String(line)
        }
        var settings = try KioskSettings.decode(
            Data(uncommented.joined(separator: "\n").utf8),
            file: URL(fileURLWithPath: "/etc/gotchu/kiosk.toml")
        )
        let encoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(settings)) as? [String: Any]
        #expect(Set(encoded?.keys.map { $0 } ?? []) == Set(KioskSettings.keys))
        // Only one credential at a time: check the token file's example on its own.
        settings.email = nil
        let configuration = try KioskConfiguration.resolve(
            file: deploy.appendingPathComponent("absent.toml"),
            fileIsExplicit: false,
            environment: [:],
            flags: settings
        )
        #expect(configuration.credentials == .tokenFile(URL(fileURLWithPath: "/etc/gotchu/token")))
    }

    @Test func unitHasTheDirectivesTheKioskReliesOn() throws {
        let unit = try String(contentsOf: deploy.appendingPathComponent("gotchu-kiosk.service"), encoding: .utf8)
        let lines = Set(unit.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        for directive in [
            "Type=notify",
            "NotifyAccess=main",
            "WatchdogSec=30",
            "ExecStart=/usr/local/bin/gotchu kiosk --config /etc/gotchu/kiosk.toml",
            "User=gotchu",
            "Group=gotchu",
            "StateDirectory=gotchu-kiosk",
            "StateDirectoryMode=0700",
            "Restart=on-failure",
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
            "SystemCallArchitectures=native",
            "CapabilityBoundingSet=",
            "WantedBy=multi-user.target",
        ] {
            #expect(lines.contains(directive), "deploy/gotchu-kiosk.service lacks \(directive)")
        }
        #expect(lines.contains { $0.hasPrefix("RestartSec=") })
        // The state directory the unit creates is the kiosk's default one.
        #expect(KioskConfiguration.defaults.stateDirectory == "/var/lib/gotchu-kiosk")
    }
}
