import GotchuAPI
import GotchuLedger

extension Problem {
    /// The problem the HTTP edge answers `refusal` with, without linking it: the problem type of the refusal kind's
    /// name, which LedgerErrorProblemTests holds the edge's own `Problem.init(_:)` to for every kind.
    init(_ refusal: LedgerError) {
        self.init(ProblemKind(rawValue: refusal.kind.rawValue) ?? .internalError, detail: refusal.detail)
    }
}
