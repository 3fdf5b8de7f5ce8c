import Foundation
import GotchuTesting
import Testing

@Suite("gotchu receive --qr", .timeLimit(.minutes(10)))
struct ReceiveQRCodeTests {
    /// The lines of the first QR code after the line `pay on a phone: URL` for `url`: the half blocks up to the next
    /// line that is not made of them.
    static func qrCode(after url: String, in lines: [String]) -> [String] {
        guard let start = lines.firstIndex(of: "pay on a phone: \(url)") else { return [] }
        return Array(lines[(start + 1)...].prefix { !$0.isEmpty && $0.allSatisfy { "█▀▄ ".contains($0) } })
    }

    @Test("The session's web checkout is printed with each EID, drawn once as a QR code that reads back as it")
    func drawsTheSessionsCheckout() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer(["--public-url", "https://Pay.Example.com/shop"])
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        let receiver = try processes.start(
            ["receive", "--amount", "12.50", "--radio", "sim", "--server", url, "--qr", "--rotate-every", "5"],
            user: "bob"
        )
        defer { _ = try? receiver.stopNow() }
        let prefix = "pay on a phone: https://pay.example.com/shop/p/"
        let first = try await receiver.waitForLine { $0.hasPrefix(prefix) }
        let address = String(first.dropFirst("pay on a phone: ".count))
        // The session's own link: 22 characters, not its EID.
        #expect(address.count == prefix.count - "pay on a phone: ".count + 22, "\(address)")
        // The next EID comes five seconds on, with the same address: the QR code shown still pays.
        _ = try await receiver.waitForLine(timeout: .seconds(120)) { $0.hasPrefix("new EID ") }
        let repeated = try await eventually(timeout: .seconds(60)) {
            receiver.lines.filter { $0 == first }.count >= 2
        }
        #expect(repeated, "\(receiver.lines)")
        #expect(!receiver.lines.contains { $0.hasPrefix("pay on a phone: ") && $0 != first })
        let lines = receiver.lines
        let code = Self.qrCode(after: address, in: lines)
        // 29 modules or more with a quiet zone of 4 on each side, two rows to a line; drawn once.
        #expect(code.count >= 19, "\(code)")
        #expect(try QRCodeReader.texts(inHalfBlocks: code) == [address])
        #expect(lines.filter { !$0.isEmpty && $0.allSatisfy { "█▀▄ ".contains($0) } }.count == code.count)
        // Plain text off a terminal: no colours.
        #expect(!lines.joined().contains("\u{1B}"))
        #expect(try await receiver.stop(signal: SIGINT) == 130)
    }

    @Test("--radio none puts nothing on the air and draws the QR code unasked; the session is paid all the same")
    func offTheAir() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer(["--public-url", "https://pay.example.com/"])
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        try await processes.run(["login", "--email", "alice@example.com", "--server", url], user: "alice")
        try await processes.run(["fund", "--amount", "50.00", "--server", url], user: "alice")
        let receiver = try processes.start(
            ["receive", "--amount", "12.50", "--radio", "none", "--rotate-every", "off", "--server", url],
            user: "bob"
        )
        defer { _ = try? receiver.stopNow() }
        let created = try await receiver.waitForLine { $0.hasPrefix("session ") }
        let line = try await receiver.waitForLine { $0.hasPrefix("pay on a phone: https://pay.example.com/p/") }
        let address = String(line.dropFirst("pay on a phone: ".count))
        let drawn = try await eventually(timeout: .seconds(60)) {
            (try? QRCodeReader.texts(inHalfBlocks: Self.qrCode(after: address, in: receiver.lines))) == [address]
        }
        #expect(drawn, "\(receiver.lines)")
        // Paid as a payer whose phone cannot range pays: by the EID shown on the terminal.
        let (eid, _) = try TypedEIDAndRotationTests.advertised(created)
        let lines = try await processes.run(["pay", "--eid", eid, "--yes", "--server", url], user: "alice")
        #expect(lines.last == #"paid $12.50 to "bob" (example.com); new balance $37.50"#)
        #expect(try await receiver.waitForExit() == 0, "\(receiver.lines) \(receiver.standardError)")
        // A payer cannot use it: there is nothing to scan with.
        let payer = try processes.start(["pay", "--radio", "none", "--server", url], user: "alice")
        #expect(try await payer.waitForExit() != 0)
        #expect(payer.standardError.contains("--radio none only suits a receiver"), "\(payer.standardError)")
    }

    @Test("Without a public URL on the ledger, --qr says why there is no QR code and the terminal still works")
    func noPublicURL() async throws {
        let processes = try GotchuProcesses()
        defer { processes.remove() }
        let (server, url) = try await processes.startServer()
        defer { _ = try? server.stopNow() }
        try await processes.run(["login", "--email", "bob@example.com", "--server", url], user: "bob")
        let receiver = try processes.start(
            ["receive", "--amount", "12.50", "--radio", "sim", "--server", url, "--qr"],
            user: "bob"
        )
        defer { _ = try? receiver.stopNow() }
        _ = try await receiver.waitForLine { $0.hasPrefix("advertising ") }
        let warned = try await eventually(timeout: .seconds(60)) {
            receiver.standardError.contains("no QR code: the ledger has no public URL")
        }
        #expect(warned, "\(receiver.standardError)")
        #expect(!receiver.lines.contains { $0.hasPrefix("pay on a phone") || $0.hasPrefix("█") })
        #expect(try await receiver.stop(signal: SIGINT) == 130)
    }
}
