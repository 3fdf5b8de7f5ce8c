/// The other side of a payment as the ledger shows it: a payee to the payer about to pay it, the other wallet of a
/// transfer to the owner of an entry. Both come from the ledger but are shown to a person: render them with
/// `DisplayText`, never raw.
public struct Counterparty: Sendable, Hashable {
    /// The name shown: the one an operator verified, else the one the user chose (by default the part of its e-mail
    /// address before the `@`; chosen names are not unique); a system account's id.
    public var name: String
    /// The domain of the user's e-mail address (`example.com`), so that `bob` of `example.com` and `bob` of
    /// `attacker.test` differ on the screen; `nil` for a system account, or an address without one.
    public var domain: String?
    /// Whether `name` is vouched for: an operator verified it, or it names a system account.
    public var verified: Bool

    /// A counterparty shown as `name`, of `domain`, `verified` or not.
    public init(name: String, domain: String?, verified: Bool) {
        self.name = name
        self.domain = domain
        self.verified = verified
    }

    /// A user shown by the rules a payee is shown by: the verified name if there is one, and its address's domain.
    public init(user: PayeeRow) {
        self.init(
            name: user.verifiedName ?? user.name,
            domain: LedgerUser.domain(ofEmail: user.email),
            verified: user.verifiedName != nil
        )
    }

    /// A system account, named by its wallet id (the operator's schema names it, not a user).
    public init(systemAccount walletID: String) {
        self.init(name: walletID, domain: nil, verified: true)
    }
}
