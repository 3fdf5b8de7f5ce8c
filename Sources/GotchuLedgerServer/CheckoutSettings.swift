import Foundation
import GotchuCore

/// How the web checkout (`/p/…`) behaves: how it writes amounts, which tips it offers, how long a browser stays signed
/// in, and whether its cookie needs HTTPS.
public struct CheckoutSettings: Sendable, Hashable {
    /// The locale amounts are written for, such as `en_US` (`$12.50`) or `de_DE` (`12,50 $`); it must be one
    /// ``isKnownLocale(_:)`` accepts. The currency is the ledger's (``GotchuLedger/LedgerPolicy/currency``).
    public var locale = "en_US"
    /// The tips offered beside paying without one, in whole percent of the amount paid (each 1 to 100, at most
    /// ``maximumTipChoices``); none by default, since a session does not say whether its terminal asks for tips.
    public var tipPercents: [Int] = []
    /// How long a browser stays signed in, from its sign-in: a fixed end, not renewed by use.
    public var browserSessionLifetime: Duration = .seconds(12 * 3600)
    /// Whether the browser-session cookie is `Secure` and named with the `__Host-` prefix: what browsers reached over
    /// HTTPS need. `nil` decides by the server: yes when it serves TLS itself.
    public var secureCookies: Bool?

    /// The most tip choices a page offers.
    public static let maximumTipChoices = 5
    /// The browser-session lifetimes a server accepts: from 5 minutes to 30 days.
    public static let allowedBrowserSessionLifetimes: ClosedRange<Int> = 300...(30 * 86_400)

    /// The defaults: `en_US`, no tips, 12 hours signed in, cookies `Secure` under TLS.
    public init() {}

    /// Whether Foundation knows `identifier` as a locale (`en_US`, `de_DE`, `fr`).
    public static func isKnownLocale(_ identifier: String) -> Bool {
        Locale.availableIdentifiers.contains(identifier)
    }

    /// Reads a list of tips such as `10,15,20` (whole percents, 1 to 100, no repeats, at most
    /// ``maximumTipChoices``; an empty text is none), or says what is wrong with it.
    public static func tipPercents(_ text: String) -> Result<[Int], TipListError> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return .success([]) }
        var percents: [Int] = []
        for part in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let digits = part.trimmingCharacters(in: .whitespaces)
            guard (1...3).contains(digits.utf8.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let percent = Int(digits), (1...100).contains(percent)
            else { return .failure(TipListError(description: "each tip must be a whole percent from 1 to 100")) }
            guard !percents.contains(percent) else {
                return .failure(TipListError(description: "\(percent) is listed twice"))
            }
            percents.append(percent)
        }
        guard percents.count <= maximumTipChoices else {
            return .failure(TipListError(description: "at most \(maximumTipChoices) tips may be offered"))
        }
        return .success(percents)
    }

    /// Why a list of tips was refused.
    public struct TipListError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong.
        public var description: String
    }

    /// `cents` written for ``locale`` in `currency` (an ISO 4217 code), exactly: the amount is a decimal, never a
    /// binary floating-point number.
    func format(_ cents: Cents, currency: String) -> String {
        let amount = Decimal(cents) / 100
        return amount.formatted(.currency(code: currency).locale(Locale(identifier: locale)))
    }
}
