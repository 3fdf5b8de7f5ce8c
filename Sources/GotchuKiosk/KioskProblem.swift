/// What keeps a charge from progressing while the kiosk retries, or why a charge failed. The kiosk decides by the
/// case; people read ``description``, which is what the D-Bus interface and the display show.
package enum KioskProblem: Hashable, Sendable, CustomStringConvertible {
    /// The radio could not advertise (adapter gone or off, advertising refused).
    case radio(String)
    /// The ledger could not be reached or did not answer in time.
    case ledgerUnreachable(String)
    /// The ledger rejected the kiosk's token, and a fresh one did not help.
    case credentialsRejected(String)
    /// The ledger does not show the charge's session to the kiosk's account.
    case sessionNotShown(String)
    /// The ledger answered with another problem.
    case ledgerAnswered(String)
    /// The ledger refused to create a session for the charge, for good: the charge fails.
    case chargeRefused(String)
    /// The charge must end, but the ledger has not yet confirmed the cancel of its session.
    indirect case cancelNotConfirmed(KioskProblem)
    /// The stored EID of the charge's session cannot be read, so it cannot be advertised.
    case unreadableEID
    /// A problem an earlier run of the kiosk recorded, known only by its text.
    case recorded(String)

    package var description: String {
        switch self {
        case .radio(let reason): "Bluetooth: \(reason)"
        case .ledgerUnreachable(let reason): "cannot reach the ledger: \(reason)"
        case .credentialsRejected(let reason):
            "the ledger rejected the kiosk's token (\(reason)); check its credentials"
        case .sessionNotShown(let reason):
            "the ledger does not show this charge's session to the kiosk's account (\(reason)); check its credentials"
        case .ledgerAnswered(let reason): "the ledger answered: \(reason)"
        case .chargeRefused(let reason): "the ledger refused the charge: \(reason)"
        case .cancelNotConfirmed(let cause): "cannot cancel the charge's session yet: \(cause)"
        case .unreadableEID: "the stored EID of its session cannot be read"
        case .recorded(let text): text
        }
    }
}
