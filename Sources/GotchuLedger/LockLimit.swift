import GotchuCore

/// The cap on sessions one payer holds locked at once (``LedgerPolicy/maximumLocksPerPayer``).
///
/// Refused with 409 `lock-limit-reached` rather than 429: the refusal follows from the payer's own state (locks it
/// holds), not from how fast it asks. Slowing down does not help; paying, or letting a lock lapse, does. A distinct
/// type keeps it apart from `session-locked` (someone else holds this session).
enum LockLimit {
    static func check(held: Int, maximum: Int) throws(LedgerError) {
        guard held < maximum else {
            throw LedgerError(
                .lockLimitReached,
                detail: "you already hold \(held) locked sessions (at most \(maximum)); pay one or let a lock lapse"
            )
        }
    }

    /// The funds rule of a lock: the payer's balance must cover this session and every other session it holds
    /// locked, so a payer cannot hold sessions it could not pay all together. Checking this session alone would
    /// let a payer with 100.00 block two sessions of 100.00 from every other payer, one of which it can never pay;
    /// the payment still checks the balance again, so this rule is about blocking others, not about overdrafts.
    /// - Parameters:
    ///   - held: the sum of the amounts of the other sessions the payer holds live locks on.
    static func checkFunds(balance: Cents, held: Cents, amount: Cents) throws(LedgerError) {
        let (needed, overflow) = held.addingReportingOverflow(amount)
        guard !overflow, balance >= needed else {
            let detail =
                held == 0
                ? "balance \(Money.format(balance)) is below \(Money.format(amount))"
                : "balance \(Money.format(balance)) does not cover \(Money.format(amount)) on top of "
                    + "\(Money.format(held)) in the sessions you hold locked; pay one or let a lock lapse"
            throw LedgerError(.insufficientFunds, detail: detail)
        }
    }
}
