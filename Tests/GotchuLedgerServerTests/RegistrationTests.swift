import Foundation
import GRDB
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuLedgerServer
import GotchuTesting
import Synchronization
import Testing

/// Mails kept in memory, in the order they were sent.
final class MailBox: RegistrationMailer, Sendable {
    private let mails = Mutex<[RegistrationMail]>([])

    func send(_ mail: RegistrationMail) async throws { mails.withLock { $0.append(mail) } }

    /// Every mail so far.
    var all: [RegistrationMail] { mails.withLock { $0 } }

    /// The code of the newest mail to `recipient`, if that mail holds one.
    func code(for recipient: String) -> String? {
        all.last { $0.recipient == recipient }.flatMap { RegistrationTests.code(in: $0.body) }
    }
}

/// A `sendmail` stand-in written at test time: a shell script that stores each message it reads on standard input,
/// with the arguments it was given, as the next numbered file of a directory.
struct CapturingSendmail {
    let directory: TemporaryDirectory
    let path: String

    init() throws {
        directory = try TemporaryDirectory(prefix: "gotchu-mail")
        path = directory.url.appendingPathComponent("sendmail").path
        let script = """
            #!/bin/sh
            dir='\(directory.url.path)'
            n=$(ls "$dir" | grep -c '^mail-')
            { for a in "$@"; do printf 'ARG %s\\n' "$a"; done; printf '\\n'; cat; } > "$dir/mail-$n.tmp"
            mv "$dir/mail-$n.tmp" "$dir/mail-$n"
            """
        try Data(script.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: path)
    }

    /// A mailer running the script.
    var mailer: SendmailCommand { SendmailCommand(path: path, sender: "Gotchu test <noreply@example.com>") }

    /// Each captured mail: the arguments the script got and the message it read.
    func mails() throws -> [(arguments: [String], message: String)] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path)
            .filter { $0.hasPrefix("mail-") && !$0.hasSuffix(".tmp") }
            .sorted { Int($0.dropFirst(5)) ?? 0 < Int($1.dropFirst(5)) ?? 0 }
        return try names.map { name in
            let text = try String(contentsOf: directory.url.appendingPathComponent(name), encoding: .utf8)
            let split = text.range(of: "\n\n")!
            let arguments = text[..<split.lowerBound].split(separator: "\n").map { String($0.dropFirst(4)) }
            return (arguments, String(text[split.upperBound...]))
        }
    }
}

@Suite("Open registration", .timeLimit(.minutes(10)))
struct RegistrationTests {
    static let password = "correct horse battery"
    static var policy: LedgerPolicy {
        var policy = LedgerPolicy()
        policy.passwordCost = 4
        return policy
    }

    /// The confirmation code in a mail's text.
    static func code(in text: String) -> String? {
        guard let range = text.range(of: #"Confirmation code: [0-9]{8}"#, options: .regularExpression) else {
            return nil
        }
        return String(text[range].suffix(8))
    }

    @Test("An address whose local part is no dot-atom is one quoted address in To: and for the mail command")
    func quotedRecipient() {
        let mail = { (recipient: String) in RegistrationMail(recipient: recipient, subject: "s", body: "b") }
        #expect(mail("new@example.com").addressSpec == "new@example.com")
        #expect(mail("o'neil+tag.x@example.com").addressSpec == "o'neil+tag.x@example.com")
        #expect(mail("a,b@example.com").addressSpec == #""a,b"@example.com"#)
        #expect(mail(#"a"b\c@example.com"#).addressSpec == #""a\"b\\c"@example.com"#)
        #expect(mail("a..b@example.com").addressSpec == #""a..b"@example.com"#)
        let message = mail("a,b@example.com").message(from: "Gotchu <noreply@example.com>", date: Date())
        #expect(message.contains("\nTo: \"a,b\"@example.com\n"))
    }

    @Test(
        "Register over HTTP, read the code from the mail the mail command got, confirm, and receive a payment",
        arguments: StoreKind.available
    )
    func registerConfirmAndGetPaid(store: StoreKind) async throws {
        let sendmail = try CapturingSendmail()
        defer { sendmail.directory.remove() }
        try await TestLedger.with(store: store, policy: Self.policy, registration: .open, mailer: sendmail.mailer) {
            ledger in
            let client = ledger.anonymous
            let answer = try await client.register(email: "New@Example.com", password: Self.password)
            #expect(answer.codeExpiresIn == 1800)

            let mails = try sendmail.mails()
            try #require(mails.count == 1)
            // The recipient after --, so an address can never pass for an option.
            #expect(mails[0].arguments == ["-i", "--", "new@example.com"])
            let message = mails[0].message
            #expect(message.hasPrefix("From: Gotchu test <noreply@example.com>\nTo: new@example.com\nSubject: "))
            #expect(message.contains("\nSubject: Your Gotchu ledger confirmation code: "), "\(message)")
            #expect(message.contains("registered this address with the Gotchu ledger."))
            #expect(message.contains("\nDate: ") && message.contains("\nContent-Type: text/plain; charset=utf-8\n"))
            let code = try #require(Self.code(in: message))

            // Until it is confirmed the account cannot log in, and a wrong code or password confirms nothing.
            #expect(
                await problemKind { try await client.login(email: "new@example.com", password: Self.password) }
                    == .emailUnconfirmed
            )
            let wrong = code == "00000000" ? "11111111" : "00000000"
            #expect(
                await problemKind {
                    try await client.confirmRegistration(email: "new@example.com", code: wrong, password: Self.password)
                }
                    == .unauthorized
            )
            #expect(
                await problemKind {
                    try await client.confirmRegistration(
                        email: "new@example.com",
                        code: code,
                        password: "other password"
                    )
                }
                    == .unauthorized
            )

            let login = try await client.confirmRegistration(
                email: "new@example.com",
                code: code,
                password: Self.password
            )
            // Single use.
            #expect(
                await problemKind {
                    try await client.confirmRegistration(email: "new@example.com", code: code, password: Self.password)
                }
                    == .unauthorized
            )
            var payee = ledger.anonymous
            payee.token = login.token
            let session = try await payee.createSession(amountCents: 250)
            let payer = try await ledger.client("payer@example.com", funded: 1_000)
            #expect(try await payer.resolve(eid: session.eid).payeeDisplay.name == "new")
            try await payer.lock(sid: session.sid)
            _ = try await payer.send(sid: session.sid, idempotencyKey: UUID().uuidString)
            #expect(try await payee.wallet().availableCents == 250)
            // And it logs in with its password from now on.
            #expect(try await client.login(email: "new@example.com", password: Self.password).userID == login.userID)
        }
    }

    @Test(
        "An unconfirmed account is refused as a payee (403 email-unconfirmed) and is credited nothing",
        arguments: StoreKind.available
    )
    func unconfirmedPayee(store: StoreKind) async throws {
        let mail = MailBox()
        try await TestLedger.with(store: store, policy: Self.policy, registration: .open, mailer: mail) { ledger in
            _ = try await ledger.anonymous.register(email: "late@example.com", password: Self.password)
            // Development login reaches the account without confirming it.
            let unconfirmed = try await ledger.client("late@example.com")
            #expect(await problemKind { try await unconfirmed.createSession(amountCents: 100) } == .emailUnconfirmed)
            #expect(await problemKind { try await unconfirmed.fund(amountCents: 100) } == .emailUnconfirmed)
            // Neither does an operator's key nor a deposit make it payable.
            var keyed = ledger.anonymous
            keyed.token = try await ledger.store.createAPIKey(
                email: "late@example.com",
                name: "till",
                scopes: [.sessionsCreate],
                actor: "test"
            ).secret
            #expect(await problemKind { try await keyed.createSession(amountCents: 100) } == .emailUnconfirmed)
            let refusal = await #expect(throws: LedgerError.self) {
                _ = try await ledger.store.deposit(
                    email: "late@example.com",
                    amountCents: 100,
                    reference: "bank-1",
                    actor: "test"
                )
            }
            #expect(refusal?.kind == .emailUnconfirmed)
            #expect(try await unconfirmed.wallet().availableCents == 0)

            // Once confirmed, it is paid like any other.
            let code = try #require(mail.code(for: "late@example.com"))
            _ = try await ledger.anonymous.confirmRegistration(
                email: "late@example.com",
                code: code,
                password: Self.password
            )
            _ = try await unconfirmed.createSession(amountCents: 100)
        }
    }

    @Test(
        "Registering an address with an account answers exactly as a new one, creates nothing and tells its owner",
        arguments: StoreKind.available
    )
    func sameAnswer(store: StoreKind) async throws {
        let mail = MailBox()
        try await TestLedger.with(store: store, policy: Self.policy, registration: .open, mailer: mail) { ledger in
            _ = try await ledger.store.addUser(
                email: "taken@example.com",
                displayName: nil,
                password: Self.password,
                actor: "test"
            )
            let before = try await ledger.store.users()
            let body = #"{"email":"%@","password":"another password"}"#
            let taken = try await ledger.raw(
                "POST",
                "/auth/register",
                body: body.replacingOccurrences(of: "%@", with: "taken@example.com")
            )
            let fresh = try await ledger.raw(
                "POST",
                "/auth/register",
                body: body.replacingOccurrences(of: "%@", with: "fresh@example.com")
            )
            #expect(taken.status == 202 && fresh.status == 202)
            #expect(taken.body == fresh.body)
            #expect(taken.headers["content-type"] == fresh.headers["content-type"])

            // One mail each: a code for the new address, word of the attempt (and no code) for the taken one.
            let mails = mail.all
            #expect(mails.map(\.recipient) == ["taken@example.com", "fresh@example.com"])
            #expect(Self.code(in: mails[0].body) == nil)
            #expect(mails[0].subject.contains("Someone tried to register"))
            #expect(Self.code(in: mails[1].body) != nil)

            // The taken account is unchanged: its password still works, and nothing was added but the new account.
            #expect(try await ledger.anonymous.login(email: "taken@example.com", password: Self.password).token != "")
            let after = try await ledger.store.users()
            #expect(after.count == before.count + 1)
            #expect(Set(after.map(\.email)).subtracting(before.map(\.email)) == ["fresh@example.com"])
        }
    }

    @Test(
        "Look-alike addresses are refused: mixed scripts and full-width outright, same-skeleton ones by mail",
        arguments: StoreKind.available
    )
    func confusables(store: StoreKind) async throws {
        let mail = MailBox()
        try await TestLedger.with(store: store, policy: Self.policy, registration: .open, mailer: mail) { ledger in
            for email in ["zoe@example.com", "sos@example.com", "coco@example.com"] {
                _ = try await ledger.client(email)
            }
            let client = ledger.anonymous
            // Latin z with Cyrillic о and е; full-width ｚｏｅ; Latin with Greek ο: refused as they are typed.
            for email in [
                "z\u{43E}\u{435}@example.com", "\u{FF5A}\u{FF4F}\u{FF45}@example.com", "z\u{3BF}e@example.com",
            ] {
                #expect(
                    await problemKind { try await client.register(email: email, password: Self.password) }
                        == .badRequest,
                    "\(email)"
                )
                #expect(await problemKind { try await ledger.client(email) } == .badRequest, "\(email)")
            }
            let users = try await ledger.store.users().count
            // Whole-script look-alikes (all Cyrillic ѕоѕ) and Latin ones (z0e, rn for m): the same answer as any
            // registration, nothing created, and the registrant's mailbox is told why.
            for email in ["\u{455}\u{43E}\u{455}@example.com", "z0e@example.com", "cocO@examp1e.com"] {
                _ = try await client.register(email: email, password: Self.password)
                let sent = try #require(mail.all.last)
                #expect(sent.recipient == email.lowercased() && Self.code(in: sent.body) == nil, "\(email)")
                #expect(sent.body.contains("looks too much"), "\(email)")
            }
            #expect(try await ledger.store.users().count == users)
            // Nor can an operator or a development login make one.
            await #expect(throws: LedgerError.self) {
                _ = try await ledger.store.addUser(
                    email: "\u{441}\u{43E}\u{441}\u{43E}@example.com",
                    displayName: nil,
                    password: Self.password,
                    actor: "test"
                )
            }
            #expect(await problemKind { try await ledger.client("z0e@example.com") } == .badRequest)
            // A single script that is not Latin is fine, as are letters with accents.
            _ = try await client.register(email: "\u{438}\u{432}\u{430}\u{43D}@example.com", password: Self.password)
            _ = try await client.register(email: "jos\u{E9}@example.com", password: Self.password)
            #expect(try await ledger.store.users().count == users + 2)
        }
    }

    @Test(
        "A code allows a few wrong tries, then is void; it expires; registering again mails a new one",
        arguments: StoreKind.available
    )
    func attemptsAndExpiry(store: StoreKind) async throws {
        let mail = MailBox()
        try await TestLedger.with(store: store, policy: Self.policy, registration: .open, mailer: mail) { ledger in
            let client = ledger.anonymous
            func confirm(_ code: String, _ password: String = Self.password) async -> ProblemKind? {
                await problemKind {
                    try await client.confirmRegistration(email: "a@example.com", code: code, password: password)
                }
            }
            _ = try await client.register(email: "a@example.com", password: Self.password)
            let code = try #require(mail.code(for: "a@example.com"))
            let wrong = code == "12345678" ? "87654321" : "12345678"
            // Five wrong tries (a wrong password counts too), then even the right code is refused.
            for attempt in 0..<5 {
                #expect(
                    await confirm(attempt == 0 ? code : wrong, attempt == 0 ? "wrong password" : Self.password)
                        == .unauthorized
                )
            }
            #expect(await confirm(code) == .unauthorized)

            // A new registration, a new code; past its lifetime it is refused.
            _ = try await client.register(email: "a@example.com", password: Self.password)
            let second = try #require(mail.code(for: "a@example.com"))
            ledger.clock.advance(seconds: 30 * 60)
            #expect(await confirm(second) == .unauthorized)

            _ = try await client.register(email: "a@example.com", password: Self.password)
            let third = try #require(mail.code(for: "a@example.com"))
            // Spaces and hyphens a person types between the digits do not matter.
            #expect(await confirm(String(third.prefix(4)) + "-" + String(third.suffix(4))) == nil)
        }
    }

    @Test(
        "Whoever registered an address first cannot keep it: a later registration's password and code replace theirs",
        arguments: StoreKind.available
    )
    func squatting(store: StoreKind) async throws {
        let mail = MailBox()
        try await TestLedger.with(store: store, policy: Self.policy, registration: .open, mailer: mail) { ledger in
            let client = ledger.anonymous
            _ = try await client.register(email: "victim@example.com", password: "squatter password")
            let squattersCode = try #require(mail.code(for: "victim@example.com"))
            _ = try await client.register(email: "victim@example.com", password: Self.password)
            let code = try #require(mail.code(for: "victim@example.com"))
            // The first code is gone, and the newest code confirms only with the newest password.
            #expect(
                await problemKind {
                    try await client.confirmRegistration(
                        email: "victim@example.com",
                        code: squattersCode,
                        password: "squatter password"
                    )
                } == .unauthorized
            )
            #expect(
                await problemKind {
                    try await client.confirmRegistration(
                        email: "victim@example.com",
                        code: code,
                        password: "squatter password"
                    )
                } == .unauthorized
            )
            _ = try await client.confirmRegistration(email: "victim@example.com", code: code, password: Self.password)
            #expect(
                await problemKind { try await client.login(email: "victim@example.com", password: "squatter password") }
                    == .unauthorized
            )
        }
    }

    @Test("Upgrading fills in the skeletons of existing addresses; the older of two look-alikes keeps its own")
    func skeletonBackfill() async throws {
        let clock = ManualClock()
        try await TestStore.with(.sqlite, policy: Self.policy, clock: clock) { store, database, _ in
            guard case .sqlite(let path) = database else { return }
            _ = try await store.login(email: "zoe@example.com")
            let queue = try DatabaseQueue(path: path)
            // Rows as a ledger before skeletons had them, one an older look-alike pair.
            try await queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO users (id, email, display_name, created_at, email_confirmed_at)
                        VALUES ('old-z0e', 'z0e@example.com', 'z0e', 1, 1);
                        UPDATE users SET email_skeleton = NULL;
                        """
                )
            }
            try await store.migrate()
            let skeletons = try await queue.read { db in
                try Row.fetchAll(db, sql: "SELECT id, email_skeleton FROM users ORDER BY created_at")
                    .map { ($0["id"] as String, $0["email_skeleton"] as String?) }
            }
            #expect(skeletons.count == 2)
            #expect(skeletons[0] == ("old-z0e", ConfusableText.skeleton("z0e@example.com")))
            #expect(skeletons[1].1 == ConfusableText.skeleton("zoe@example.com") + " " + skeletons[1].0)
            // The skeleton is taken all the same: a third look-alike is refused.
            await #expect(throws: LedgerError.self) { _ = try await store.login(email: "z0e@examp1e.com") }
            #expect(try await store.login(email: "zoe@example.com").displayName == "zoe")
        }
    }

    @Test("Skeletons and scripts: look-alikes share a skeleton; one script, or Latin with Han and kana, passes")
    func skeletons() {
        let zoe = ConfusableText.skeleton("zoe@example.com")
        for lookAlike in [
            "z\u{43E}\u{435}@example.com", "\u{FF5A}\u{FF4F}\u{FF45}@example.com", "z0e@example.com",
            "ZOE@EXAMPLE.COM", "z\u{3BF}e@example.com", "z\u{200B}oe@example.com",
        ] {
            #expect(ConfusableText.skeleton(lookAlike) == zoe, "\(lookAlike)")
        }
        #expect(ConfusableText.skeleton("modern") == ConfusableText.skeleton("rnodern"))
        #expect(ConfusableText.skeleton("paypal") == ConfusableText.skeleton("paypa1"))
        #expect(ConfusableText.skeleton("zoe") != ConfusableText.skeleton("zo\u{E9}"))
        #expect(ConfusableText.mixesScripts("z\u{43E}\u{435}"))
        #expect(ConfusableText.mixesScripts("z\u{3BF}e"))
        #expect(!ConfusableText.mixesScripts("\u{438}\u{432}\u{430}\u{43D}"))
        #expect(!ConfusableText.mixesScripts("\u{3B5}\u{3BB}\u{3AD}\u{3BD}\u{3B7}"))
        #expect(!ConfusableText.mixesScripts("taro.\u{5C71}\u{7530}\u{305F}\u{308D}\u{3046}"))
        #expect(!ConfusableText.mixesScripts("jos\u{E9}-42"))
    }
}
