import Foundation
package import GotchuCore

/// How the web checkout (`/p/…`) behaves: how it writes amounts, how long a browser stays signed in, and whether its
/// cookie needs HTTPS. The tips a page offers are its session's (``GotchuCore/TipPrompt``), not the server's.
public struct CheckoutSettings: Sendable, Hashable {
    /// The locale amounts are written for, such as `en_US` (`$12.50`) or `de_DE` (`12,50 $`); it must be one
    /// ``isKnownLocale(_:)`` accepts. The currency is the ledger's (``GotchuLedger/LedgerPolicy/currency``).
    public var locale = "en_US"
    /// How long a browser stays signed in, from its sign-in: a fixed end, not renewed by use.
    public var browserSessionLifetime: Duration = .seconds(12 * 3600)
    /// Whether the browser-session cookie is `Secure` and named with the `__Host-` prefix: what browsers reached over
    /// HTTPS need. `nil` decides by the server: yes when it serves TLS itself.
    public var secureCookies: Bool?

    /// The browser-session lifetimes a server accepts: from 5 minutes to 30 days.
    public static let allowedBrowserSessionLifetimes: ClosedRange<Int> = 300...(30 * 86_400)

    /// The defaults: `en_US`, 12 hours signed in, cookies `Secure` under TLS.
    public init() {}

    /// Whether Foundation knows `identifier` as a locale (`en_US`, `de_DE`, `fr`).
    public static func isKnownLocale(_ identifier: String) -> Bool {
        Locale.availableIdentifiers.contains(identifier)
    }

    /// `cents` written for ``locale`` in `currency` (an ISO 4217 code), exactly: the amount is a decimal, never a
    /// binary floating-point number.
    package func format(_ cents: Cents, currency: String) -> String {
        let amount = Decimal(cents) / 100
        return amount.formatted(.currency(code: currency).locale(Locale(identifier: locale)))
    }
}
