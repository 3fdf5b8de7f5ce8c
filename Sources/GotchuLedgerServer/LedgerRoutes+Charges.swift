import Foundation
import GotchuAPI
import GotchuLedger
import GotchuLedgerAPI
import GotchuReceipts
import HTTPTypes
import Hummingbird

extension LedgerRoutes {
    /// The routes of charges a terminal signed while it could not reach the ledger: a payer's device that read one
    /// over Bluetooth asks the ledger what it is, then pays it. A user's token only, as for any payment.
    var chargeRoutes: [LedgerRoute] {
        [
            LedgerRoute(.post, "/charges/resolve", "resolveCharge") { request, context in
                _ = try await context.user(for: .send)
                let body = try await request.decode(as: ChargeRequest.self, context: context)
                let charge = try Self.charge(body.charge)
                return try json(ChargeResponse(charge, try await store.resolveCharge(charge)))
            },
            LedgerRoute(.post, "/charges/pay", "payCharge") { request, context in
                let user = try await context.user(for: .send)
                try limiters.sendPerUser?.take(user)
                let key = try requiredIdempotencyKey(request, for: "POST /charges/pay")
                let body = try await request.decode(as: ChargeRequest.self, context: context)
                let charge = try Self.charge(body.charge)
                let outcome = try await store.payCharge(
                    charge,
                    payerID: user,
                    idempotencyKey: key,
                    tipCents: body.tipCents ?? 0
                )
                let refusal: LedgerError
                switch outcome {
                case .paid(let balance, _, let replayed):
                    metrics?.payment(outcome: replayed ? "replayed" : "paid")
                    // Read back, so a replay carries the same receipt the first answer did.
                    let (receipt, paymentID) = try await store.sentPayment(
                        sid: charge.sessionID,
                        payerID: user,
                        idempotencyKey: key
                    )
                    let answer = BalanceResponse(newBalanceCents: balance, receipt: receipt, paymentID: paymentID)
                    return try json(answer, headers: replayHeaders(replayed))
                case .refused(let error):
                    refusal = error
                // A charge's session is never split and is opened with the charge's amount: neither can happen, and
                // each is told as what it would mean.
                case .amountChanged:
                    refusal = LedgerError(.invalidInput, detail: "the charge's session asks for another amount")
                case .paidBefore:
                    refusal = LedgerError(.sessionAlreadyPaid, detail: "you paid this charge already")
                }
                metrics?.payment(outcome: refusal.kind.rawValue)
                return Problem(refusal).httpResponse
            },
        ]
    }

    /// The charge a request carries, read and checked field by field (its signature is the store's to check).
    private static func charge(_ text: String) throws -> TerminalCharge {
        guard text.utf8.count <= 2 * TerminalCharge.maximumLength, let bytes = Base64URL.decode(text) else {
            throw Problem(.badRequest, detail: "charge must be a terminal's charge, base64url without padding")
        }
        do {
            return try TerminalCharge(encoded: bytes)
        } catch {
            throw Problem(.badRequest, detail: error.description)
        }
    }
}

extension ChargeResponse {
    /// A charge and what the ledger knows of it.
    init(_ charge: TerminalCharge, _ view: ChargeView) {
        self.init(
            sid: view.sid,
            amountCents: charge.amountCents,
            currency: charge.currency,
            reference: charge.reference.isEmpty ? nil : charge.reference,
            confirmationCode: charge.confirmationCode,
            expiresAt: Date(storeMilliseconds: charge.expiresAtMilliseconds),
            terminalName: view.terminalName,
            payeeDisplay: EmailAddress.cleaned(PayeeDisplay(view.payee)),
            status: view.status.rawValue
        )
    }
}
