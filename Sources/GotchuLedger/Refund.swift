public import GotchuCore
public import GotchuReceipts

/// Money a payee returned to the payer of a paid session: one refund, as its request (and each replay of it) is
/// answered.
public struct Refund: Sendable, Hashable {
    /// The refund's id.
    public var id: String
    /// The refunded session.
    public var sid: String
    /// What this refund returned to the payer, in cents.
    public var amount: Cents
    /// The session's refunded total once this refund was made, in cents.
    public var refundedTotal: Cents
    /// The refund's signed receipt (kind ``ReceiptKind/refund``); `nil` where the ledger signs none.
    public var receipt: Receipt?
    /// The refunded session's order reference; `nil` when it has none.
    public var reference: String?

    /// A refund as the engine made or found it.
    public init(
        id: String,
        sid: String,
        amount: Cents,
        refundedTotal: Cents,
        receipt: Receipt?,
        reference: String? = nil
    ) {
        self.reference = reference
        self.id = id
        self.sid = sid
        self.amount = amount
        self.refundedTotal = refundedTotal
        self.receipt = receipt
    }

    /// The refund a `refunds` row records, of a session under `reference`, with its receipt read from the row's ``RefundRow/receiptBody``.
    /// - Throws: ``LedgerError/Kind/inconsistent`` when the stored receipt does not decode.
    init(_ row: RefundRow, reference: String?) throws(LedgerError) {
        let receipt = try row.receiptBody.map { body throws(LedgerError) in
            try StoredReceipt(
                id: row.receiptID ?? "",
                kind: ReceiptKind.refund.rawValue,
                sessionID: row.sessionID,
                body: body
            ).receipt()
        }
        self.init(
            id: row.id,
            sid: row.sessionID,
            amount: row.amount,
            refundedTotal: row.refundedTotal,
            receipt: receipt,
            reference: reference
        )
    }
}
