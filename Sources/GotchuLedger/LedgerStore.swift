public import GotchuAPI
public import GotchuCore

/// The rules a ledger store enforces, the same for every backend.
public struct LedgerPolicy: Sendable, Hashable {
    /// How long a session can be resolved, locked and paid after creation (the spec's 5 minutes).
    public var sessionLifetime: Duration = .seconds(300)
    /// How long a lock holds if the holder does not pay.
    public var lockLifetime: Duration = .seconds(30)
    /// How long idempotency keys and their outcomes are kept before pruning.
    public var idempotencyRetention: Duration = .seconds(24 * 3600)
    /// After this long an unfinished request's key is taken as abandoned (its server died mid-request; the payment
    /// transaction is atomic, so nothing of it was written) and a retry may run it again.
    public var inFlightTimeout: Duration = .seconds(60)
    /// The largest amount a session or a funding may carry, in cents.
    public var maximumAmount: Cents = 100_000_000_000
    /// How many sessions one payer may hold locked at once. A lock blocks every other payer of that session until it
    /// lapses, so without a cap one account could squat on every session in a hall.
    public var maximumLocksPerPayer: Int = 3
    /// The ISO 4217 currency of every amount, as receipts state it.
    public var currency: String = "USD"
    /// Whether payments are signed (a receipt each). Always on in a server; off only to measure what signing costs.
    public var signsReceipts: Bool = true
    /// How long a server keeps using the signing key it loaded before it looks for a newer one (another replica may
    /// have rotated it; the old key stays published, so its receipts still verify meanwhile).
    public var receiptKeyRefresh: Duration = .seconds(60)

    /// The default policy.
    public init() {}

    /// Checks an amount against the policy, naming the field in the message.
    public func validate(amount: Cents, field: String = "amount_cents") throws(LedgerError) {
        guard amount >= 1 else {
            throw LedgerError(.invalidAmount, detail: "\(field) must be at least 1 cent, got \(amount)")
        }
        guard amount <= maximumAmount else {
            throw LedgerError(.invalidAmount, detail: "\(field) must be at most \(maximumAmount) cents, got \(amount)")
        }
    }
}

/// A user as the store knows it.
public struct LedgerUser: Sendable, Hashable {
    /// The user's id (a UUID).
    public var id: String
    /// The name shown to payers.
    public var displayName: String

    /// A user as read from the database.
    public init(id: String, displayName: String) {
        self.id = id
        self.displayName = displayName
    }
}

/// What the idempotency layer decided for a `send` request before running it.
public enum SendAdmission: Sendable, Hashable {
    /// The key is new (or abandoned): the caller must now run ``LedgerStore/completeSend(sid:payerID:idempotencyKey:)``.
    case proceed
    /// The key already has an outcome: answer with it, marked as a replay.
    case replay(SendOutcome)
}

/// The outcome of a payment, as stored with its idempotency key: a new balance, or the business failure.
public enum SendOutcome: Sendable, Hashable {
    /// The payment went through; the payer's balance afterwards.
    case paid(newBalanceCents: Cents)
    /// The payment was refused for a business reason (expired, insufficient funds, …).
    case refused(LedgerError)

    /// Whether this outcome is kept under its idempotency key and replayed to a retry with that key.
    ///
    /// A stored outcome is the key's final answer (IETF idempotency-key draft, Stripe): a success, and the refusals
    /// no retry of this request can change: paid already, cancelled, expired, the payee's own session, and
    /// insufficient funds at the moment of paying (the balance may rise later, but a payment the payer was told had
    /// failed must not go through on a late retry; a new attempt takes a new key).
    ///
    /// The other refusals are not stored and the key is released, as if the request had never started, because
    /// they depend on state the payer is expected to change and then retry: no live lock (`lock-required`: the lock
    /// lapsed, typically while a crashed client or server was being restarted) and another payer's lock
    /// (`session-locked`: it lapses or is released). Replaying those would make the key unusable after the payer
    /// locks again, and a client resuming a journaled payment could then never finish it. An unknown session is
    /// refused before anything is stored, so unknown ids cannot fill the table either. Releasing such a refusal is
    /// safe: it moved nothing, and a session is paid at most once whichever key pays it.
    public var isRecorded: Bool {
        switch self {
        case .paid: return true
        case .refused(let error):
            switch error.kind {
            case .sessionAlreadyPaid, .sessionCancelled, .sessionExpired, .ownSession, .insufficientFunds:
                return true
            default:
                return false
            }
        }
    }
}

/// Sums that must hold whatever happened: the audit behind the double-entry invariants.
public struct LedgerAudit: Sendable, Hashable {
    /// Sum of every wallet's balance, system accounts included. Constant (zero) for a healthy ledger.
    public var totalBalanceCents: Cents
    /// Wallets whose balance differs from the sum of their entries.
    public var walletsOutOfBalance: [String]
    /// User wallets below zero.
    public var negativeWallets: [String]
    /// Transfers whose entries are not exactly one DEBIT and one CREDIT of the same amount.
    public var unbalancedTransfers: [String]
    /// Sessions paid more than once (entries referring to one session in more than one transfer).
    public var sessionsPaidTwice: [String]
    /// Number of ledger entries.
    public var entryCount: Int

    /// The sums as a backend computed them.
    public init(
        totalBalanceCents: Cents,
        walletsOutOfBalance: [String],
        negativeWallets: [String],
        unbalancedTransfers: [String],
        sessionsPaidTwice: [String],
        entryCount: Int
    ) {
        self.totalBalanceCents = totalBalanceCents
        self.walletsOutOfBalance = walletsOutOfBalance
        self.negativeWallets = negativeWallets
        self.unbalancedTransfers = unbalancedTransfers
        self.sessionsPaidTwice = sessionsPaidTwice
        self.entryCount = entryCount
    }

    /// Whether every invariant holds.
    public var isHealthy: Bool {
        totalBalanceCents == 0 && walletsOutOfBalance.isEmpty && negativeWallets.isEmpty
            && unbalancedTransfers.isEmpty && sessionsPaidTwice.isEmpty
    }
}

/// The storage behind the ledger API. Every method is one atomic step; expiry and lock lapses are judged by the
/// store's own clock inside the same transaction. Business failures are thrown as ``LedgerError``s.
public protocol LedgerStore: Sendable {
    /// The policy this store enforces.
    var policy: LedgerPolicy { get }

    /// Creates the schema or brings it up to date. Servers call it once at start-up, before they accept requests;
    /// a store that only one process uses also releases the idempotency keys a crash left in flight then.
    func migrate() async throws

    /// Finds or creates the user with this e-mail address, with a wallet.
    func login(email: String) async throws -> LedgerUser

    /// The user with this id, if it exists.
    func user(id: String) async throws -> LedgerUser?

    /// The user's wallet: balance and the latest entries, newest first.
    func wallet(userID: String, recentLimit: Int) async throws -> WalletResponse

    /// Credits the user from the system funding account through the ledger; returns the new balance.
    func fund(userID: String, amountCents: Cents) async throws -> Cents

    /// Creates a session asking `amountCents` for `payeeID`, with a fresh EID unique among live sessions.
    ///
    /// With an `idempotencyKey` (scoped to the payee, kept as long as the session) the payee's first session under
    /// that key is answered again instead, whatever its status since, so a retry never makes a second session for
    /// one charge; concurrent creates with one key make one session. The key with another amount is refused (422
    /// ``LedgerError/Kind/idempotencyKeyReused``).
    /// - Returns: the session and whether it is the replay of an earlier create.
    func createSession(
        payeeID: String,
        amountCents: Cents,
        idempotencyKey: String?
    ) async throws -> (session: CreateSessionResponse, replayed: Bool)

    /// Looks a live session up by EID: 404 if unknown, 410 if expired or cancelled.
    func resolve(eid: EID) async throws -> ResolveResponse

    /// Locks the session for `payerID`: first wins, lapses after the policy's lock lifetime. The payer's balance
    /// must cover this session and every other session it holds locked, or it is refused `insufficient-funds`.
    func lock(sid: String, payerID: String) async throws

    /// Releases `payerID`'s lock on the session, so another payer may lock it at once. Idempotent: the session's
    /// last holder (or its payer) is answered ok when there is no live lock left to release. Anyone else is refused:
    /// 409 `session-locked` while another payer holds it, 403 `forbidden` otherwise.
    func unlock(sid: String, payerID: String) async throws

    /// Admits and runs a payment, replaying a stored outcome when there is one.
    /// - Returns: the outcome and whether it is a replay.
    func send(sid: String, payerID: String, idempotencyKey: String) async throws -> (SendOutcome, Bool)

    /// Admits a payment request under its idempotency key: a replay, a refusal (key reused with another session,
    /// still in flight, or a session that does not exist: then nothing is stored), or the go-ahead, recorded as in
    /// flight.
    func beginSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendAdmission

    /// Runs an admitted payment: the transfer and its outcome are written in one transaction with the key, or the
    /// key is released in that transaction when the outcome is not one to replay (``SendOutcome/isRecorded``).
    func completeSend(sid: String, payerID: String, idempotencyKey: String) async throws -> SendOutcome

    /// Forgets an in-flight key whose request failed for a non-business reason, so the client may retry.
    func abandonSend(payerID: String, idempotencyKey: String) async throws

    /// The session as its payee or current lock holder sees it; 404 for anyone else.
    func session(sid: String, viewerID: String) async throws -> SessionStatusResponse

    /// Cancels a live session; payee only.
    func cancel(sid: String, payeeID: String) async throws

    /// Deletes idempotency keys older than the retention; returns how many.
    func pruneIdempotencyKeys() async throws -> Int

    /// Recomputes the invariants from the entries.
    func audit() async throws -> LedgerAudit

    /// Checks the whole ledger from its rows: the hash chain, each transfer, every balance, the sum over all
    /// accounts, sessions against their entries, and receipts against their payments and keys; stops at the first
    /// broken row.
    func verify() async throws -> LedgerVerification

    /// The signed receipt of the session's payment, if it was paid (and signed).
    func receipt(sessionID: String) async throws -> Receipt?

    /// Every public receipt key, the current one first: old keys stay, so old receipts still verify.
    func receiptKeys() async throws -> ReceiptKeySet

    /// Makes a new signing key current and retires the others (their private halves are erased, their public
    /// halves stay published); returns the new key.
    func rotateReceiptKey() async throws -> ReceiptPublicKey

    /// Checks the store answers.
    func ping() async throws
}

extension LedgerStore {
    /// Admits and runs a payment in two steps (``sendInTwoSteps(sid:payerID:idempotencyKey:)``).
    public func send(sid: String, payerID: String, idempotencyKey: String) async throws -> (SendOutcome, Bool) {
        try await sendInTwoSteps(sid: sid, payerID: payerID, idempotencyKey: idempotencyKey)
    }

    /// Admits and runs a payment in two steps (``beginSend(sid:payerID:idempotencyKey:)``, then
    /// ``completeSend(sid:payerID:idempotencyKey:)``), replaying a stored outcome when there is one.
    /// - Returns: the outcome and whether it is a replay.
    public func sendInTwoSteps(
        sid: String,
        payerID: String,
        idempotencyKey: String
    ) async throws -> (SendOutcome, Bool) {
        switch try await beginSend(sid: sid, payerID: payerID, idempotencyKey: idempotencyKey) {
        case .replay(let outcome):
            return (outcome, true)
        case .proceed:
            do {
                return (try await completeSend(sid: sid, payerID: payerID, idempotencyKey: idempotencyKey), false)
            } catch {
                try? await abandonSend(payerID: payerID, idempotencyKey: idempotencyKey)
                throw error
            }
        }
    }
}
