import GotchuAPI

/// The cap on sessions one payer holds locked at once (``LedgerPolicy/maximumLocksPerPayer``).
///
/// Refused with 409 `lock-limit-reached` rather than 429: the refusal follows from the payer's own state (locks it
/// holds), not from how fast it asks. Slowing down does not help; paying, or letting a lock lapse, does. A distinct
/// type keeps it apart from `session-locked` (someone else holds this session).
enum LockLimit {
    static func check(held: Int, maximum: Int) throws(Problem) {
        guard held < maximum else {
            throw Problem(
                .lockLimitReached,
                detail: "you already hold \(held) locked sessions (at most \(maximum)); pay one or let a lock lapse"
            )
        }
    }
}
