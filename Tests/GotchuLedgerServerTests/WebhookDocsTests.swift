import Foundation
import GotchuWebhooks
import Testing

@Suite("Webhook documentation", .timeLimit(.minutes(10)))
struct WebhookDocsTests {
    /// The Swift receiver docs/webhooks.md shows is, line for line, the function the signature tests run
    /// (`verifyGotchuWebhook` in WebhookPartsTests.swift), so the documented code is the tested code.
    @Test func swiftSnippetIsTheTestedOne() throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = tests.deletingLastPathComponent().deletingLastPathComponent()
        let document = try String(contentsOf: root.appendingPathComponent("docs/webhooks.md"), encoding: .utf8)
        let source = try String(
            contentsOf: tests.appendingPathComponent("WebhookPartsTests.swift"),
            encoding: .utf8
        )
        let blocks = document.components(separatedBy: "```swift\n").dropFirst()
        let snippet = try #require(blocks.first?.components(separatedBy: "```").first)
        #expect(snippet.contains("func verifyGotchuWebhook("))
        #expect(source.contains(snippet), "docs/webhooks.md shows a Swift receiver the tests do not run")
    }
}
