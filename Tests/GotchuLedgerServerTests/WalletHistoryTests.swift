import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerServer
import GotchuReceipts
import GotchuTesting
import Testing

@Suite("Wallet history: GET /wallet/entries pages and gotchu wallet --all", .timeLimit(.minutes(5)))
struct WalletHistoryTests {
    /// Pays `amount` from `payer` to `payee` through the store.
    static func pay(_ store: any LedgerStore, from payer: LedgerUser, to payee: LedgerUser, amount: Cents) async throws
    {
        let (session, _) = try await store.createSession(payeeID: payee.id, amountCents: amount, idempotencyKey: nil)
        try await store.lock(sid: session.sid, payerID: payer.id)
        let (outcome, _) = try await store.send(sid: session.sid, payerID: payer.id, idempotencyKey: session.sid)
        guard case .paid = outcome else { throw TestFailure("payment refused: \(outcome)") }
    }

    /// Every page from the newest, with `between` run after each page but the last.
    static func allPages(
        _ client: LedgerClient,
        limit: Int,
        between: () async throws -> Void = {}
    ) async throws -> [WalletHistoryEntry] {
        var entries: [WalletHistoryEntry] = []
        var cursor: String?
        for _ in 0..<1_000 {
            let page = try await client.walletEntries(limit: limit, cursor: cursor)
            #expect(page.entries.count <= limit)
            entries += page.entries
            guard let next = page.nextCursor else { return entries }
            #expect(page.entries.count == limit, "only the last page is short")
            cursor = next
            try await between()
        }
        throw TestFailure("the pages never ended")
    }

    @Test(
        "Paging covers every entry once, newest first, while new entries are written between pages",
        arguments: StoreKind.available
    )
    func pagesAreStableUnderInserts(store kind: StoreKind) async throws {
        try await TestLedger.with(store: kind) { ledger in
            let alice = try await ledger.client("alice@example.com", funded: 10_000)
            let aliceUser = try await ledger.store.login(email: "alice@example.com")
            let bob = try await ledger.store.login(email: "bob@shop.example")
            try await ledger.store.verifyMerchant(email: "bob@shop.example", name: "Bob's Bikes", actor: "test")
            for amount in 1...7 {
                try await Self.pay(ledger.store, from: aliceUser, to: bob, amount: Cents(amount))
                _ = try await ledger.store.fund(userID: aliceUser.id, amountCents: Cents(100 + amount))
            }
            let before = try await alice.walletEntries(limit: EntryPageSize.maximum)
            #expect(before.nextCursor == nil)
            #expect(before.entries.count == 15)

            var written = 0
            let paged = try await Self.allPages(alice, limit: 4) {
                // Newer than every page: they must neither shift a page nor show up in this listing.
                try await Self.pay(ledger.store, from: aliceUser, to: bob, amount: 1_000)
                _ = try await ledger.store.fund(userID: aliceUser.id, amountCents: 3)
                written += 2
            }
            #expect(written == 6)
            #expect(paged.map(\.id) == before.entries.map(\.id), "each entry once, in order, none written since")
            #expect(Set(paged.map(\.id)).count == paged.count)

            // Read again from the top: the new entries first, then the same history.
            let after = try await Self.allPages(alice, limit: 5)
            #expect(after.count == 15 + written)
            #expect(Array(after.suffix(15)).map(\.id) == before.entries.map(\.id))
            #expect(zip(after, after.dropFirst()).allSatisfy { $0.createdAt >= $1.createdAt })

            // What each entry says: the other side by the payee display rules, the session, the kind.
            let payment = try #require(paged.first { $0.kind == "SEND_P2P" })
            #expect(payment.direction == .debit)
            #expect(payment.counterparty == PayeeDisplay(name: "Bob's Bikes", domain: "shop.example", verified: true))
            #expect(payment.sessionID != nil)
            let funding = try #require(paged.first { $0.kind == "DEV_FUND" })
            #expect(funding.direction == .credit && funding.sessionID == nil)
            #expect(funding.counterparty == PayeeDisplay(name: LedgerAccounts.fundingWalletID, verified: true))
            let amounts = paged.filter { $0.kind == "SEND_P2P" }.map(\.amountCents)
            #expect(amounts == [7, 6, 5, 4, 3, 2, 1])

            // The payee sees the same payments from its side, named by the payer's (unverified) name.
            var bobClient = ledger.anonymous
            bobClient.token = try await ledger.tokens.issue(userID: bob.id)
            let received = try await Self.allPages(bobClient, limit: 3)
            #expect(received.count == 7 + 3)
            #expect(received.allSatisfy { $0.kind == "RECEIVE_P2P" && $0.direction == .credit })
            #expect(
                received.allSatisfy {
                    $0.counterparty == PayeeDisplay(name: "alice", domain: "example.com", verified: false)
                }
            )
            #expect(Set(received.compactMap(\.sessionID)) == Set(after.compactMap(\.sessionID)))
        }
    }

    @Test("Another user's entries are never listed, and its cursors are refused", arguments: StoreKind.available)
    func othersEntriesStayHidden(store kind: StoreKind) async throws {
        try await TestLedger.with(store: kind) { ledger in
            let alice = try await ledger.client("alice@example.com", funded: 500)
            let carol = try await ledger.client("carol@example.com", funded: 700)
            _ = try await carol.fund(amountCents: 800)
            _ = try await carol.fund(amountCents: 900)
            let aliceEntries = try await Self.allPages(alice, limit: 1)
            let carolEntries = try await Self.allPages(carol, limit: 1)
            #expect(aliceEntries.map(\.amountCents) == [500])
            #expect(carolEntries.map(\.amountCents) == [900, 800, 700])
            #expect(Set(aliceEntries.map(\.id)).isDisjoint(with: carolEntries.map(\.id)))

            // Carol's cursor, sent by Alice: well formed, and refused rather than paging Carol's wallet.
            let carolCursor = try #require(try await carol.walletEntries(limit: 1).nextCursor)
            let stolen = try await ledger.raw(
                "GET",
                "/wallet/entries?cursor=\(carolCursor)",
                headers: ["Authorization": "Bearer \(alice.token ?? "")"]
            )
            #expect(stolen.status == 404)
            #expect(TestLedger.problemKind(stolen.body) == .notFound)
            #expect(!String(decoding: stolen.body, as: UTF8.self).contains("carol"))
        }
    }

    @Test(
        "A limit out of range or a cursor of no cursor's length is 400; any other this server did not give is 404",
        arguments: StoreKind.available
    )
    func badQueriesAreRefused(store kind: StoreKind) async throws {
        try await TestLedger.with(store: kind) { ledger in
            let alice = try await ledger.client("alice@example.com", funded: 500)
            _ = try await alice.fund(amountCents: 600)
            let first = try await alice.walletEntries(limit: 1)
            let cursor = try #require(first.nextCursor)
            let seq = try #require(
                Base64URL.decode(cursor).map { String(decoding: $0, as: UTF8.self) }?.split(separator: " ")
                    .dropFirst().first
            )
            func token(_ text: String) -> String { Base64URL.encode(Data(text.utf8)) }
            let malformed = [
                "limit=0", "limit=501", "limit=-1", "limit=abc", "limit=1.5", "limit=", "limit=0001",
                "limit=99999999999999999999", "limit=1&limit=2", "cursor=\(cursor)&cursor=\(cursor)",
                "cursor=", "cursor=\(String(repeating: "A", count: 4_000))",
            ]
            // Of a cursor's length, but naming no page of this wallet: not base64url, the wrong shape or version, a
            // made-up id, the right id at another position, text that is not even UTF-8.
            let unknown = [
                "cursor=%00", "cursor=not-base64!", "cursor=\(cursor)%3D",
                "cursor=\(token("v1 1"))", "cursor=\(token("v2 \(seq) \(first.entries[0].id)"))",
                "cursor=\(token("v1 \(seq) 00000000-0000-0000-0000-000000000000"))",
                "cursor=\(token("v1 999999 \(first.entries[0].id)"))",
                "cursor=\(token("v1 -3 \(first.entries[0].id)"))",
                "cursor=\(token("v1 \(seq) \(first.entries[0].id)'; DROP TABLE ledger_entries; --"))",
                "cursor=\(String(repeating: "0", count: 127))", "cursor=_-_-",
            ]
            for (queries, status, kind) in [(malformed, 400, ProblemKind.badRequest), (unknown, 404, .notFound)] {
                for query in queries {
                    let answer = try await ledger.raw(
                        "GET",
                        "/wallet/entries?\(query)",
                        headers: ["Authorization": "Bearer \(alice.token ?? "")"]
                    )
                    #expect(answer.status == status, "\(query)")
                    #expect(TestLedger.problemKind(answer.body) == kind, "\(query)")
                }
            }
            // The good cursor still pages, and the largest page is allowed.
            let rest = try await alice.walletEntries(limit: EntryPageSize.maximum, cursor: cursor)
            #expect(rest.entries.map(\.amountCents) == [500] && rest.nextCursor == nil)
            // Default page size when no limit is given.
            let defaults = try await alice.walletEntries()
            #expect(defaults.entries.count == 2)
        }
    }

    @Test("gotchu wallet --all --csv and --json: hostile counterparty names stay inert")
    func exportsEscapeHostileNames() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        // Names the HTTP edge would refuse but the store took before it did: a formula with a comma and quotes,
        // an escape sequence and a bidi override (lowercase: the store keeps addresses lowercased).
        let formula = "=hyperlink(\"http://x.test\",\"pay\")\u{1B}[2k"
        let minus = "-2+3\u{202E}cba"
        try await TestLedger.with { ledger in
            let url = ledger.url.absoluteString
            try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
            let alice = try await ledger.store.login(email: "alice@example.com")
            _ = try await ledger.store.fund(userID: alice.id, amountCents: 10_000)
            let first = try await ledger.store.login(email: formula + "@attacker.test")
            let second = try await ledger.store.login(email: minus + "@attacker.test")
            try await Self.pay(ledger.store, from: alice, to: first, amount: 123)
            try await Self.pay(ledger.store, from: alice, to: second, amount: 45)

            let csv = try await processes.run(["wallet", "--all", "--csv", "--server", url], user: "alice")
            // Records end in CRLF (RFC 4180): every line, and only there.
            #expect(csv.allSatisfy { $0.hasSuffix("\r") && !$0.dropLast().contains("\r") })
            let lines = csv.map { String($0.dropLast()) }
            let records = try Self.parseCSV(lines)
            #expect(records.count == 4)
            #expect(records.first?.first == "time")
            #expect(records.allSatisfy { $0.count == 11 }, "\(records)")
            let names = records.dropFirst().map { $0[4] }
            #expect(names.count == 3)
            // Newest first: the second payee, the first, then the funding.
            #expect(names[0] == "'-2+3\\u{202E}cba")
            #expect(names[1] == "'=hyperlink(\"http://x.test\",\"pay\")\\u{1B}[2k")
            #expect(names[2] == "system:funding")
            #expect(records[1][2] == "-45" && records[2][2] == "-123" && records[3][2] == "10000")
            for line in lines { #expect(PayPromptTests.isTerminalSafe(line), "\(line.debugDescription)") }

            let json = try await processes.run(["wallet", "--all", "--json", "--server", url], user: "alice")
            #expect(json.count == 3)
            let decoded = try json.map { try APIJSON.decoder().decode(WalletHistoryEntry.self, from: Data($0.utf8)) }
            // JSON keeps the names exactly, every character past ASCII written as an escape.
            #expect(decoded.map { $0.counterparty?.name } == [minus, formula, "system:funding"])
            #expect(json.allSatisfy { $0.unicodeScalars.allSatisfy { (0x20..<0x7F).contains($0.value) } })

            // Without --all the listing is what it always was.
            let plain = try await processes.run(["wallet", "--server", url], user: "alice")
            let walletID = try await ledger.store.wallet(userID: alice.id, recentLimit: 1).id
            #expect(plain.first == "balance $98.32   wallet \(walletID)")
            #expect(plain.dropFirst().first?.hasPrefix("time (UTC)") == true)
        }
    }

    /// RFC 4180 records from lines (CRLF already cut); quoted fields may span lines.
    static func parseCSV(_ lines: [String]) throws -> [[String]] {
        let text = lines.joined(separator: "\n")
        var records: [[String]] = []
        var record: [String] = []
        var field = ""
        var quoted = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            index = text.index(after: index)
            if quoted {
                if character == "\"" {
                    if index < text.endIndex, text[index] == "\"" {
                        field.append("\"")
                        index = text.index(after: index)
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
            } else if character == "\"" {
                guard field.isEmpty else { throw TestFailure("a quote inside an unquoted field") }
                quoted = true
            } else if character == "," {
                record.append(field)
                field = ""
            } else if character == "\n" {
                record.append(field)
                records.append(record)
                record = []
                field = ""
            } else {
                field.append(character)
            }
        }
        guard !quoted else { throw TestFailure("an unterminated quoted field") }
        record.append(field)
        records.append(record)
        return records
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
