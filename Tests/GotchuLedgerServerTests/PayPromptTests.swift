import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuSimulatedRadio
import GotchuTesting
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Testing

/// `gotchu pay` run as a process against a payee whose name was made to forge the confirmation question: eleven
/// backspaces to erase "Pay $500.00" on the terminal, then `$5.00⠀to⠀coffee` with braille blanks for spaces.
@Suite("gotchu pay asks with the ledger's amount first and a payee name that cannot forge it", .timeLimit(.minutes(10)))
struct PayPromptTests {
    static let forgedName = String(repeating: "\u{8}", count: 11) + "$5.00\u{2800}to\u{2800}coffee"

    /// Advertises `eid` on the shared air of `processes` (where `gotchu pay --radio sim` scans) while `body` runs.
    private func advertising<T: Sendable>(
        _ eid: EID,
        _ processes: GotchuProcesses,
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        let air = processes.directory.url.appendingPathComponent("runtime").appendingPathComponent("gotchu-air")
        let terminal = try await SharedAirRadio(
            directory: air,
            peer: SimulatedPeer(name: "terminal", at: Position(x: 0, y: 0)),
            seed: 5
        )
        return try await terminal.withAdvertisement(Advertisement(eid: eid)) { _ in try await body() }
    }

    /// What a terminal shows for `line`: a backspace moves the cursor back, so later text overwrites earlier.
    static func rendered(_ line: String) -> String {
        var cells: [Character] = []
        var cursor = 0
        for character in line {
            if character == "\u{8}" {
                cursor = max(0, cursor - 1)
                continue
            }
            if cursor < cells.count { cells[cursor] = character } else { cells.append(character) }
            cursor += 1
        }
        return String(cells)
    }

    static func isTerminalSafe(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0 != "\n" && DisplayText.isUnsafe($0) }
    }

    @Test("A name stored by an older server: the payment of $500.00 is asked and reported as $500.00, name cleaned")
    func storedHostileName() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        try await TestLedger.with { ledger in
            // An older server let the name in; the store takes it as it is, the HTTP edge no longer would.
            let payeeUser = try await ledger.store.login(email: Self.forgedName + "@attacker.test")
            var payee = ledger.anonymous
            payee.token = try await ledger.tokens.issue(userID: payeeUser.id)
            let session = try await payee.createSession(amountCents: 50_000)
            let url = ledger.url.absoluteString
            try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
            try await processes.run(["fund", "--amount", "1000.00", "--server", url], user: "alice")

            let lines = try await advertising(session.eid, processes) {
                try await processes.run(["pay", "--radio", "sim", "--yes", "--server", url], user: "alice")
            }
            let resolved = try #require(lines.first { $0.hasPrefix("resolved ") })
            let paid = try #require(lines.last)
            #expect(resolved.hasPrefix("resolved $500.00 → \""))
            #expect(resolved.hasSuffix("\" (attacker.test)"))
            #expect(paid.hasPrefix("paid $500.00 to \""))
            #expect(paid.hasSuffix("\" (attacker.test); new balance $500.00"))
            for line in lines {
                #expect(Self.isTerminalSafe(line), "\(line.debugDescription)")
                #expect(!Self.rendered(line).contains("$5.00 to coffee"), "\(line.debugDescription)")
            }
            #expect(try await payee.wallet().availableCents == 50_000)
        }
    }

    @Test("A server sending a forged name raw: the question shows $500.00 before the name, escaped and quoted")
    func rawHostileName() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let eid = try #require(EID(rawValue: "a1b2c3d4e5"))
        // Not a ledger: a server that says what an attacker wants, which the CLI must still show safely.
        let resolve = ResolveResponse(
            sid: "s",
            amountCents: 50_000,
            payeeDisplay: PayeeDisplay(name: Self.forgedName + "\u{1B}[2K", domain: "example.com\u{202E}\u{200B}")
        )
        try await HostileServer.withRunning(resolve: resolve) { url in
            try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
            let payer = try await advertising(eid, processes) { () async throws -> RunningCommand in
                let command = try processes.start(["pay", "--radio", "sim", "--server", url], user: "alice")
                // Standard input is empty: the question is asked, then declined.
                _ = try await command.waitForExit()
                return command
            }
            let question = try #require(payer.lines.first { $0.hasPrefix("Pay ") })
            #expect(
                question.hasPrefix("Pay $500.00 to \"" + String(repeating: "\\u{8}", count: 11) + "$5.00\\u{2800}to")
            )
            #expect(
                question.hasSuffix(
                    "\\u{2800}coffee\\u{1B}[2K\" (example.com\\u{202E}\\u{200B}), code "
                        + ConfirmationCode.of(sessionID: "s") + "? [y/N] "
                )
            )
            #expect(!Self.rendered(question).contains("Pay $5.00"))
            for line in payer.lines { #expect(Self.isTerminalSafe(line), "\(line.debugDescription)") }
            #expect(Self.isTerminalSafe(payer.standardError))
            #expect(payer.standardError.contains("declined; nothing was paid"))
        }
    }
}

@Suite("gotchu pay's question says whether the payee's name is verified", .timeLimit(.minutes(10)))
struct VerifiedPayeePromptTests {
    @Test("A verified merchant is asked for as one; any other payee's name is said to be its own choice")
    func verifiedAndNot() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        try await TestLedger.with { ledger in
            let url = ledger.url.absoluteString
            let shop = try await ledger.client("shop@example.com")
            let bob = try await ledger.client("bob@example.com")
            try await ledger.store.verifyMerchant(email: "shop@example.com", name: "Corner Shop Ltd", actor: "operator")
            try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
            for (payee, expected) in [
                (shop, #"Pay $1.00 to "Corner Shop Ltd" (example.com), verified merchant, code "#),
                (bob, #"Pay $1.00 to "bob" (example.com), name chosen by the payee, not verified, code "#),
            ] {
                let session = try await payee.createSession(amountCents: 100)
                let payer = try await advertising(session.eid, processes) { () async throws -> RunningCommand in
                    let command = try processes.start(["pay", "--radio", "sim", "--server", url], user: "alice")
                    // Standard input is empty: the question is asked, then declined.
                    _ = try await command.waitForExit()
                    return command
                }
                let code = ConfirmationCode.of(sessionID: session.sid)
                #expect(payer.lines.first { $0.hasPrefix("Pay ") } == expected + "\(code)? [y/N] ", "\(payer.lines)")
            }
        }
    }

    /// Advertises `eid` on the shared air of `processes` while `body` runs.
    private func advertising<T: Sendable>(
        _ eid: EID,
        _ processes: GotchuProcesses,
        _ body: @Sendable () async throws -> T
    ) async throws -> T {
        let air = processes.directory.url.appendingPathComponent("runtime").appendingPathComponent("gotchu-air")
        let terminal = try await SharedAirRadio(
            directory: air,
            peer: SimulatedPeer(name: "terminal", at: Position(x: 0, y: 0)),
            seed: 5
        )
        return try await terminal.withAdvertisement(Advertisement(eid: eid)) { _ in try await body() }
    }
}

@Suite("gotchu wallet shows a server's strings escaped", .timeLimit(.minutes(10)))
struct WalletOutputTests {
    @Test("Entry types, references and the wallet id from a hostile server cannot rewrite the terminal")
    func hostileEntries() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let hostile = "\u{1B}[2J\u{202E}" + String(repeating: "x", count: 200)
        let entry = LedgerEntry(
            id: "e",
            direction: .credit,
            amountCents: 500,
            type: "payment" + hostile,
            refType: "session\u{8}\u{8}",
            refID: "\u{200B}abc",
            createdAt: Date(timeIntervalSince1970: 0)
        )
        let wallet = WalletResponse(walletID: "w\u{1B}]0;owned\u{7}", availableCents: 500, recent: [entry])
        try await HostileServer.withRunning(wallet: wallet) { url in
            try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
            let lines = try await processes.run(["wallet", "--server", url], user: "alice")
            #expect(lines.first == #"balance $5.00   wallet w\u{1B}]0;owned\u{7}"#)
            for line in lines { #expect(PayPromptTests.isTerminalSafe(line), "\(line.debugDescription)") }
            let row = try #require(lines.last)
            // Escapes count as shown, and the cell is cut at 24 characters: the 200 x's cannot push the table apart.
            #expect(row.contains("+$5.00") && row.contains(#"payment\u{1B}[2J\u{202E}…"#), "\(row)")
            #expect(row.count < 120, "\(row)")
        }
    }
}

/// A server that answers dev-login, resolve and the wallet with fixed bodies, nothing else.
private enum HostileServer {
    static func withRunning(
        resolve: ResolveResponse? = nil,
        wallet: WalletResponse? = nil,
        _ body: @Sendable (String) async throws -> Void
    ) async throws {
        let router = Router()
        router.post("/auth/dev-login") { _, _ in
            try json(LoginResponse(token: "t", userID: "u\u{1B}[31m"))
        }
        if let resolve { router.post("/sessions/resolve") { _, _ in try json(resolve) } }
        if let wallet { router.get("/wallet/me") { _, _ in try json(wallet) } }
        try await withLoopbackApplication(router, body)
    }

    private static func json(_ value: some Encodable) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(
            status: .ok,
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: try APIJSON.encoder().encode(value)))
        )
    }
}
