import Foundation
import Testing

@testable import GotchuLedgerServer

/// The web checkout's settings: tips as an operator writes them, amounts as a locale writes them.
@Suite("Web checkout settings")
struct CheckoutSettingsTests {
    @Test("A list of tips is whole percents from 1 to 100, at most five, none twice; empty is none")
    func tips() throws {
        #expect(try CheckoutSettings.tipPercents("10,15,20").get() == [10, 15, 20])
        #expect(try CheckoutSettings.tipPercents(" 5 , 100 ").get() == [5, 100])
        #expect(try CheckoutSettings.tipPercents("").get() == [])
        for bad in ["0", "101", "10,10", "1,2,3,4,5,6", "10%", "1.5", "-5", "10,,15", "abc", "0010"] {
            #expect(throws: CheckoutSettings.TipListError.self, "\(bad)") {
                try CheckoutSettings.tipPercents(bad).get()
            }
        }
    }

    @Test("Amounts are written exactly, for the locale, in the ledger's currency")
    func amounts() {
        var settings = CheckoutSettings()
        #expect(settings.format(1250, currency: "USD") == "$12.50")
        #expect(settings.format(1, currency: "USD") == "$0.01")
        #expect(settings.format(100_000_000_000, currency: "USD") == "$1,000,000,000.00")
        // 2^53 + 1 cents: beyond what a binary floating-point number holds exactly.
        #expect(settings.format(9_007_199_254_740_993, currency: "USD") == "$90,071,992,547,409.93")
        settings.locale = "de_DE"
        #expect(settings.format(1250, currency: "EUR").hasPrefix("12,50"))
        #expect(CheckoutSettings.isKnownLocale("en_US") && CheckoutSettings.isKnownLocale("de_DE"))
        #expect(!CheckoutSettings.isKnownLocale("xx_YY") && !CheckoutSettings.isKnownLocale("<script>"))
    }
}
