import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import GotchuKioskCLI
import GotchuLedgerClient
import GotchuSettings
import GotchuTesting
import Testing

/// The terminal's `tip_percents`: read from every layer as a list, refused when the ledger would refuse it, and sent
/// with every session the kiosk creates.
@Suite struct KioskTipPromptTests {
    private let environment = ["GOTCHU_KIOSK_SERVER": "http://ledger.test", "GOTCHU_KIOSK_EMAIL": "kiosk@example.com"]

    private func directory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("kiosk-tips-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    private func resolve(
        toml: String,
        environment extra: [String: String] = [:],
        flags: KioskSettings = KioskSettings()
    ) throws -> KioskConfiguration {
        let folder = try directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("kiosk.toml")
        try toml.write(to: file, atomically: true, encoding: .utf8)
        return try KioskConfiguration.resolve(
            file: file,
            fileIsExplicit: true,
            environment: environment.merging(extra) { $1 },
            flags: flags
        )
    }

    @Test func noTipIsAskedByDefault() throws {
        #expect(try resolve(toml: "").tipPrompt == .none)
        #expect(KioskConfiguration.builtIn.tipPrompt == .none)
    }

    @Test func aListInTheFileTheEnvironmentOrAFlag() throws {
        let file = try resolve(toml: "tip_percents = [10, 15, 20]\n")
        #expect(file.tipPrompt.percents == [10, 15, 20])
        let environment = try resolve(
            toml: "tip_percents = [10, 15, 20]\n",
            environment: ["GOTCHU_KIOSK_TIP_PERCENTS": "5, 25"]
        )
        #expect(environment.tipPrompt.percents == [5, 25])
        let flags = try KioskSettings(flags: try KioskOptions.parse(["--tip-percents", "18"]))
        let flagged = try resolve(
            toml: "tip_percents = [10, 15, 20]\n",
            environment: ["GOTCHU_KIOSK_TIP_PERCENTS": "5, 25"],
            flags: flags
        )
        #expect(flagged.tipPrompt.percents == [18])
        // An empty list in a higher layer turns the file's tips off.
        #expect(
            try resolve(toml: "tip_percents = [10]\n", flags: KioskSettings { $0.tipPercents = [] }).tipPrompt == .none
        )
    }

    @Test(
        arguments: [
            ("tip_percents = [0]\n", "tip_percents in"), ("tip_percents = [101]\n", "tip_percents in"),
            ("tip_percents = [10, 10]\n", "tip_percents in"),
            ("tip_percents = [1, 2, 3, 4, 5, 6]\n", "tip_percents in"),
            ("tip_percents = \"10,15\"\n", "tip_percents"), ("tip_percents = [10.5]\n", "tip_percents"),
        ]
    )
    func aBadListIsNamed(toml: String, named: String) throws {
        do {
            _ = try resolve(toml: toml)
            Issue.record("\(toml) was accepted")
        } catch {
            #expect("\(error)".contains(named), "\(error)")
        }
    }

    @Test func aBadVariableIsNamed() throws {
        for text in ["ten", "10,,15", "0"] {
            do {
                _ = try resolve(toml: "", environment: ["GOTCHU_KIOSK_TIP_PERCENTS": text])
                Issue.record("\(text) was accepted")
            } catch {
                #expect("\(error)".hasPrefix("GOTCHU_KIOSK_TIP_PERCENTS: must be a list"), "\(error)")
            }
        }
    }

    @Test("Every session the kiosk's ledger connection creates asks for its tips; without them, for none")
    func sessionsCarryTheTips() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let asking = KioskLedger(
            baseURL: URL(string: url)!,
            credentials: .email("shop@example.com"),
            tipPrompt: try TipPrompt(percents: [10, 15, 20])
        )
        let created = try await asking.createSession(amountCents: 4000, shares: 2, idempotencyKey: "tips-1")
        #expect(created.tipPercents == [10, 15, 20])
        let quiet = KioskLedger(baseURL: URL(string: url)!, credentials: .email("shop@example.com"))
        let plain = try await quiet.createSession(amountCents: 4000, idempotencyKey: "tips-2")
        #expect(plain.tipPercents == nil)
        var payer = LedgerClient(baseURL: URL(string: url)!)
        payer.token = try await payer.devLogin(email: "payer@example.com").token
        #expect(try await payer.resolve(eid: created.eid).tipPercents == [10, 15, 20])
        #expect(try await payer.resolve(eid: plain.eid).tipPercents == nil)
    }
}
