import GotchuAPI
import GotchuLedgerAPI
import GotchuLedgerServer
import Testing

/// Refusals stored under an idempotency key are tested against the stores alone, in LedgerErrorTests.
@Suite("Ledger refusals: one domain type, problems at the edge", .timeLimit(.minutes(10)))
struct LedgerErrorProblemTests {
    @Test("Every refusal kind is answered with the problem type of the same name")
    func mapping() {
        for kind in LedgerError.Kind.allCases {
            let problem = Problem(LedgerError(kind, detail: "why"))
            #expect(problem.kind?.rawValue == kind.rawValue, "\(kind)")
            #expect(problem.detail == "why")
        }
    }
}
