import GotchuCore
import Testing

/// The tips a terminal suggests: whole percents from 1 to 100, at most five, none twice; empty is none.
@Suite("Tip prompts", .timeLimit(.minutes(10)))
struct TipPromptTests {
    @Test("A list is read as typed, in its order; empty is none")
    func parses() throws {
        #expect(try TipPrompt.parse("10,15,20").percents == [10, 15, 20])
        #expect(try TipPrompt.parse(" 20 , 5% ,100").percents == [20, 5, 100])
        #expect(try TipPrompt.parse("") == .none)
        #expect(try TipPrompt.parse("  ").isEmpty)
        #expect(try TipPrompt.parse("10,15,20").description == "10,15,20")
        #expect(try TipPrompt(percents: [1, 2, 3, 4, 5]).percents.count == TipPrompt.maximumChoices)
        #expect(try TipPrompt(percents: []) == .none)
        #expect(try TipPrompt.parse("15").tips == [.percent(hundredths: 1500)])
    }

    @Test(
        "Anything but 1 to 5 different whole percents from 1 to 100 is refused with a reason",
        arguments: ["0", "101", "10,10", "1,2,3,4,5,6", "1.5", "-5", "10,,15", "abc", "0010", "10 15", ",", "+5", "٥"]
    )
    func refusesText(_ text: String) {
        #expect(throws: TipPrompt.Invalid.self, "\(text)") { try TipPrompt.parse(text) }
    }

    @Test("Lists refused as numbers say why")
    func refusesNumbers() {
        for (percents, reason) in [
            ([0], "from 1 to 100, got 0"), ([101], "got 101"), ([10, 10], "10% is listed twice"),
            ([1, 2, 3, 4, 5, 6], "at most 5"), ([-1], "got -1"),
        ] {
            #expect(throws: TipPrompt.Invalid.self) { try TipPrompt(percents: percents) }
            do {
                _ = try TipPrompt(percents: percents)
            } catch {
                #expect(error.description.contains(reason), "\(percents): \(error)")
            }
        }
    }
}
