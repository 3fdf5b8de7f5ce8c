import Foundation
import GotchuCheckout
import Testing

@testable import GotchuLedgerServer

/// The web checkout's settings: amounts as a locale writes them.
@Suite("Web checkout settings", .timeLimit(.minutes(10)))
struct CheckoutSettingsTests {
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
