import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuKioskCLI
import GotchuKioskClient
import GotchuLedgerClient
import GotchuSettings
import GotchuTesting
import Testing

/// The terminal's `tip_percents`: read from every layer as a list, refused when the ledger would refuse it, and sent
/// with every session the kiosk creates.
@Suite(.timeLimit(.minutes(10))) struct KioskTipPromptTests {
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

    @Test("The kiosk's ledger connection asks for the tips of each session it creates; without them, for none")
    func sessionsCarryTheTips() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        let ledger = KioskLedger(baseURL: URL(string: url)!, credentials: .email("shop@example.com"))
        let metered = MeteredKioskLedger(ledger, metrics: KioskMetrics())
        let asking = try await metered.createSession(
            amountCents: 4000,
            shares: 2,
            tipPercents: [10, 15, 20],
            reference: "table 7",
            idempotencyKey: "tips-1"
        )
        #expect(asking.tipPercents == [10, 15, 20])
        #expect(asking.reference == "table 7")
        let plain = try await ledger.createSession(amountCents: 4000, idempotencyKey: "tips-2")
        #expect(plain.tipPercents == nil)
        var payer = LedgerClient(baseURL: URL(string: url)!)
        payer.token = try await payer.devLogin(email: "payer@example.com").token
        #expect(try await payer.resolve(eid: asking.eid).tipPercents == [10, 15, 20])
        #expect(try await payer.resolve(eid: plain.eid).tipPercents == nil)
    }

    @Test("A charge's tips are written with it and read back; a store from before them reads none")
    func storeRoundTrip() throws {
        let folder = try directory()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try KioskStore(directory: folder)
        var charge = KioskCharge(id: "c-1", amountCents: 900, reference: "", createdAt: .now, updatedAt: .now)
        charge.tipPercents = [15, 20]
        try store.insert(KioskStore.Record(charge: charge))
        #expect(try KioskStore(directory: folder).record(id: "c-1")?.charge.tipPercents == [15, 20])
        charge.state = .cancelled
        charge.tipPercents = []
        try store.update(KioskStore.Record(charge: charge))
        #expect(try KioskStore(directory: folder).record(id: "c-1")?.charge.tipPercents == [])
    }
}

/// `ChargeWithTips` and the kiosk's `tip_percents` over D-Bus, against a real ledger: what a payer resolving the
/// charge's EID is told.
@Suite(
    "Tip prompts over D-Bus: tip_percents, ChargeWithTips, gotchu charge --ask-tip",
    .serialized,
    .timeLimit(.minutes(3))
)
struct KioskTipPromptDBusTests {
    typealias Key = KioskInterface.ChargeKey

    /// The EID the kiosk advertises for charge `id`, once it has one.
    private func eid(of id: String, _ connection: DBusConnection) async throws -> EID {
        var eid: EID?
        let found = try await eventually(timeout: .seconds(60)) {
            let charge = try await connection.kiosk.charge(id)
            eid = charge[Key.eid.rawValue, as: String.self].flatMap(EID.init(rawValue:))
            return eid != nil
        }
        try #require(found, "charge \(id) got no EID")
        return try #require(eid)
    }

    @Test("Charge suggests the kiosk's tips; ChargeWithTips its own, or none; bad tips are InvalidArgs")
    func chargeWithTips() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk(["--tip-percents", "10,15,20"])
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        var payer = LedgerClient(baseURL: URL(string: daemon.url)!)
        payer.token = try await payer.devLogin(email: "payer@example.com").token

        let asked: [([Int]?, [Int]?)] = [(nil, [10, 15, 20]), ([18], [18]), ([], nil), ([5, 25], [5, 25])]
        for (tips, resolved) in asked {
            let id = try await connection.kiosk.charge(amountCents: 4000, shares: 2, tipPercents: tips)
            let eid = try await eid(of: id, connection)
            #expect(try await payer.resolve(eid: eid).tipPercents == resolved, "\(String(describing: tips))")
            let listed = try await connection.kiosk.charge(id)[Key.tipPercents.rawValue, as: [Int32].self]
            #expect(listed?.map(Int.init) == resolved, "GetCharge of \(String(describing: tips))")
            _ = try await connection.kiosk.cancel(id)
        }

        for bad in [[0], [101], [10, 10], [1, 2, 3, 4, 5, 6]] {
            await #expect(throws: DBusError.self, "\(bad)") {
                do {
                    _ = try await connection.kiosk.charge(amountCents: 4000, tipPercents: bad)
                } catch let error as DBusError {
                    #expect(error.name == .invalidArgs, "\(error)")
                    #expect(error.message.contains("invalid tips"), "\(error)")
                    throw error
                }
            }
        }
        // Nothing was started by them: the next charge is taken.
        let id = try await connection.kiosk.charge(amountCents: 100)
        _ = try await connection.kiosk.cancel(id)
    }

    @Test("gotchu charge --ask-tip sends the charge's tips; --ask-tip none suggests none")
    func chargeCommand() async throws {
        let daemon = try await KioskDaemon.start()
        defer { daemon.stop() }
        let (kiosk, _) = try await daemon.startKiosk(["--tip-percents", "10"])
        defer { _ = try? kiosk.stopNow() }
        let connection = try await daemon.connect()
        var payer = LedgerClient(baseURL: URL(string: daemon.url)!)
        payer.token = try await payer.devLogin(email: "payer@example.com").token
        for (option, resolved) in [("12,18", [12, 18]), ("none", nil)] as [(String, [Int]?)] {
            let lines = try await daemon.processes.run(
                ["charge", "9.00", "--ask-tip", option, "--no-wait", "--bus", daemon.bus.address],
                user: "pos"
            )
            // "charge ID: $9.00"
            let accepted = try #require(lines.first { $0.hasPrefix("charge ") }, "\(lines)")
            let id = String(accepted.dropFirst("charge ".count).prefix { $0 != ":" })
            let eid = try await eid(of: id, connection)
            #expect(try await payer.resolve(eid: eid).tipPercents == resolved, "\(option)")
            _ = try await connection.kiosk.cancel(id)
        }
        let refused = try daemon.processes.start(
            ["charge", "9.00", "--ask-tip", "0", "--bus", daemon.bus.address],
            user: "pos"
        )
        #expect(try await refused.waitForExit() != 0)
        #expect(refused.standardError.contains("--ask-tip"), "\(refused.standardError)")
    }
}
