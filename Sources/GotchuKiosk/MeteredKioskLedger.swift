package import GotchuAPI
package import GotchuCore
package import GotchuLedgerClient

/// A ledger service that counts its failed calls in ``KioskMetrics`` (`gotchu_kiosk_ledger_errors_total{kind}`).
/// It forwards every requirement of ``KioskLedgerService``, those with a default implementation too: a call that
/// fell to a default would answer as if the wrapped service could not do it.
package struct MeteredKioskLedger: KioskLedgerService {
    /// The service that makes the calls.
    package let base: any KioskLedgerService
    /// Where the failures are counted.
    package let metrics: KioskMetrics

    /// Counts the failures of `base` in `metrics`.
    package init(_ base: any KioskLedgerService, metrics: KioskMetrics) {
        self.base = base
        self.metrics = metrics
    }

    package func createSession(
        amountCents: Cents,
        shares: Int,
        tipPercents: [Int],
        reference: String?,
        idempotencyKey: String
    ) async throws(LedgerClientError)
        -> CreateSessionResponse
    {
        try await counted { () throws(LedgerClientError) in
            try await base.createSession(
                amountCents: amountCents,
                shares: shares,
                tipPercents: tipPercents,
                reference: reference,
                idempotencyKey: idempotencyKey
            )
        }
    }

    package func sessionState(sid: String) async throws(LedgerClientError) -> KioskChargeMachine.SessionState {
        try await counted { () throws(LedgerClientError) in try await base.sessionState(sid: sid) }
    }

    package func cancelSession(sid: String) async throws(LedgerClientError) {
        try await counted { () throws(LedgerClientError) in try await base.cancelSession(sid: sid) }
    }

    package func rotateEID(sid: String) async throws(LedgerClientError) -> EIDRotationResponse {
        try await counted { () throws(LedgerClientError) in try await base.rotateEID(sid: sid) }
    }

    package func refund(
        sid: String,
        amountCents: Cents?,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        try await counted { () throws(LedgerClientError) in
            try await base.refund(sid: sid, amountCents: amountCents, idempotencyKey: idempotencyKey)
        }
    }

    package func refund(
        sid: String,
        paymentID: String?,
        amountCents: Cents,
        idempotencyKey: String
    ) async throws(LedgerClientError) -> RefundResponse {
        try await counted { () throws(LedgerClientError) in
            try await base.refund(
                sid: sid,
                paymentID: paymentID,
                amountCents: amountCents,
                idempotencyKey: idempotencyKey
            )
        }
    }

    package func nextState(
        sid: String,
        after: KioskChargeMachine.SessionState
    ) async throws(LedgerClientError) -> KioskChargeMachine.SessionState {
        // A ledger without event streams is not failing: the kiosk polls instead.
        try await counted(unless: LedgerClient.eventStreamsUnsupported) { () throws(LedgerClientError) in
            try await base.nextState(sid: sid, after: after)
        }
    }

    private func counted<T>(
        unless expected: (LedgerClientError) -> Bool = { _ in false },
        _ body: () async throws(LedgerClientError) -> T
    ) async throws(LedgerClientError) -> T {
        do {
            return try await body()
        } catch {
            // A call the kiosk gave up on (the safety read answered first, a shutdown) did not fail.
            if !Task.isCancelled && !expected(error) { metrics.ledgerError(error) }
            throw error
        }
    }
}
