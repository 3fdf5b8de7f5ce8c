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

    @Test("Each EID's web checkout is printed and drawn as a QR code that reads back as its address")
    func drawsEachEIDsCheckout() async throws {
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
        // The next EID comes five seconds on, with its own address and code.
        let second = try await receiver.waitForLine(timeout: .seconds(120)) { $0.hasPrefix(prefix) && $0 != first }
        let addresses = [first, second].map { String($0.dropFirst("pay on a phone: ".count)) }
        // Both addresses are as long, so their codes are too: wait for the second's last line.
        let complete = try await eventually(timeout: .seconds(60)) {
            let lines = receiver.lines
            return Self.qrCode(after: addresses[1], in: lines).count
                == Self.qrCode(after: addresses[0], in: lines).count
        }
        #expect(complete)
        let lines = receiver.lines
        for (index, address) in addresses.enumerated() {
            let eid = address.suffix(10)
            let grouped = "\(eid.prefix(4)) \(eid.dropFirst(4).prefix(4)) \(eid.suffix(2))"
            if index == 0 {
                #expect(lines.contains { $0.hasPrefix("session ") && $0.contains("EID \(grouped), code") }, "\(lines)")
            } else {
                #expect(lines.contains("new EID \(grouped) on the air"), "\(lines)")
            }
            let code = Self.qrCode(after: address, in: lines)
            // 29 modules or more with a quiet zone of 4 on each side, two rows to a line.
            #expect(code.count >= 19, "\(code)")
            #expect(try QRCodeReader.texts(inHalfBlocks: code) == [address])
        }
        // Plain text off a terminal: no colours.
        #expect(!lines.joined().contains("\u{1B}"))
        #expect(try await receiver.stop(signal: SIGINT) == 130)
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
