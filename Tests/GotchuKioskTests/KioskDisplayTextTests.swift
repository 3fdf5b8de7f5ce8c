import Foundation
import GotchuAPI
import GotchuCore
import GotchuKiosk
import GotchuTesting
import Testing

/// The customer reads the amount beside the payee, the reference and any problem: none of those texts may reorder
/// or disguise what is shown, whichever way the display is read (page, `/status`, `/events`).
@Suite("The customer display escapes bidi, invisible and control characters in every text", .timeLimit(.minutes(10)))
struct KioskDisplayTextTests {
    static let payee = "Corner\u{202E}pohS"
    static let reference = "42\u{200B}\u{2800}7"
    static let problem = "ledger said \u{1B}[2J\u{2066}no"

    static var failing: KioskStatus {
        var status = KioskStatus.advertising(payee: payee, reference: reference)
        status.state = .failed
        status.charge?.state = .failed
        status.charge?.problem = problem
        status.problem = problem
        return status
    }

    static func expectEscaped(_ status: KioskStatus) {
        #expect(status.payeeName == #"Corner\u{202E}pohS"#)
        #expect(status.charge?.reference == #"42\u{200B}\u{2800}7"#)
        #expect(status.problem == #"ledger said \u{1B}[2J\u{2066}no"#)
        #expect(status.charge?.problem == #"ledger said \u{1B}[2J\u{2066}no"#)
    }

    @Test("The page and the status embedded in it")
    func page() async throws {
        try await withDisplay(SettableStatusSource(Self.failing)) { display in
            let connection = try LoopbackConnection(port: display.port)
            try connection.send("GET", "/", headers: ["Connection": "close"])
            _ = try await connection.readHead()
            let page = try await connection.readBody()
            #expect(page.contains(#"<p id="payee">Corner\u{202E}pohS</p>"#))
            #expect(page.contains(#"<p id="reference">Reference: 42\u{200B}\u{2800}7</p>"#))
            #expect(page.contains(#"<p id="detail">ledger said \u{1B}[2J\u{2066}no</p>"#))
            #expect(!page.unicodeScalars.contains { $0 != "\n" && DisplayText.isUnsafe($0) })
        }
    }

    @Test("GET /status and the events stream")
    func json() async throws {
        try await withDisplay(SettableStatusSource(Self.failing)) { display in
            let status = try LoopbackConnection(port: display.port)
            try status.send("GET", "/status", headers: ["Connection": "close"])
            _ = try await status.readHead()
            Self.expectEscaped(
                try APIJSON.decoder().decode(KioskStatus.self, from: Data(try await status.readBody().utf8))
            )

            let events = try LoopbackConnection(port: display.port)
            try events.send("GET", "/events")
            _ = try await events.readHead()
            let data = try #require(try await events.nextData())
            Self.expectEscaped(try APIJSON.decoder().decode(KioskStatus.self, from: Data(data.utf8)))
            events.disconnect()
        }
    }
}
