public import GotchuCore

extension TipPrompt {
    /// The suggestion as the stores keep it in `payment_sessions.tip_percents`: `10,15,20`, or `nil` for none.
    public var stored: String? { isEmpty ? nil : description }

    /// A suggestion as read from `payment_sessions.tip_percents`; a value no version writes is refused rather than
    /// guessed at.
    public init(stored: String?) throws(LedgerError) {
        guard let stored else {
            self = .none
            return
        }
        do {
            self = try TipPrompt.parse(stored)
        } catch {
            throw LedgerError(.inconsistent, detail: "a session has the unreadable tip percents '\(stored)'")
        }
        guard !isEmpty else { throw LedgerError(.inconsistent, detail: "a session has empty tip percents") }
    }
}
