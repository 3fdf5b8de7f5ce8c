public import Foundation
public import GotchuCore
public import GotchuReceipts

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
    /// How long an EID keeps resolving after the payee rotated it away: a payer who heard it just before the rotation
    /// still finds the session. Past it the EID answers 410 `eid-retired`.
    public var eidGrace: Duration = .seconds(10)
    /// How many EIDs one session may be given in all (its first included), so a payee rotating in a loop cannot
    /// grow the table without end. A session rotated every 5 s for its default 5 minutes needs 61.
    public var maximumEIDsPerSession: Int = 100
    /// The bcrypt cost (log2 of the rounds) of new password hashes: each step doubles the time a login and a guess
    /// take. Must be in ``Passwords/allowedCosts``.
    public var passwordCost: Int = Passwords.defaultCost
    /// The fewest characters a new password may have.
    public var minimumPasswordLength: Int = Passwords.defaultMinimumLength
    /// How long a code mailed by open registration (``LedgerStore/register(email:password:)``) confirms the address.
    public var confirmationCodeLifetime: Duration = .seconds(30 * 60)
    /// How many wrong tries a confirmation code allows; then it is void, and only registering again mails a new one.
    public var confirmationAttempts: Int = 5
    /// How long a refresh token stays usable if it is not used; each refresh starts the time again.
    public var refreshTokenLifetime: Duration = .seconds(30 * 86_400)
    /// The ISO 4217 currency of every amount, as receipts state it.
    public var currency: String = "USD"
    /// Whether payments are signed (a receipt each). Always on in a server; off only to measure what signing costs.
    public var signsReceipts: Bool = true
    /// How long a server keeps using the signing key it loaded before it looks for a newer one (another replica may
    /// have rotated it; the old key stays published, so its receipts still verify meanwhile).
    public var receiptKeyRefresh: Duration = .seconds(60)
    /// How many webhook endpoints one user may have (deleted ones do not count).
    public var maximumWebhookEndpoints: Int = 16
    /// How long an endpoint's deliveries may fail without a success before it is disabled.
    public var webhookDisableAfter: Duration = .seconds(3 * 86_400)

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
    /// Whether an operator disabled the account: it cannot log in, and its tokens are refused.
    public var disabled: Bool
    /// When the user's access tokens were last revoked (a logout, a stolen refresh token), in milliseconds since
    /// 1970 on the store's clock: a token issued before is refused. `nil` when they never were.
    public var tokensNotBefore: Int64?

    /// A user as read from the database.
    public init(id: String, displayName: String, disabled: Bool = false, tokensNotBefore: Int64? = nil) {
        self.id = id
        self.displayName = displayName
        self.disabled = disabled
        self.tokensNotBefore = tokensNotBefore
    }
}

/// What the idempotency layer decided for a `send` request before running it.
package enum SendAdmission: Sendable, Hashable {
    /// The key is new (or abandoned), and now in flight: the payment runs under it.
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

/// What a rotation changed: the session's new EID, and the EIDs it replaced with how long they still resolve.
public struct EIDRotation: Sendable, Hashable {
    /// The session.
    public var sid: String
    /// The EID to advertise from now on.
    public var eid: EID
    /// The EIDs it replaces (one, unless an earlier rotation's answer was lost).
    public var retired: [EID]
    /// When the replaced EIDs stop resolving.
    public var retiredResolveUntil: Date
    /// When the session expires.
    public var expiresAt: Date

    /// A rotation as the engine made it.
    public init(sid: String, eid: EID, retired: [EID], retiredResolveUntil: Date, expiresAt: Date) {
        self.sid = sid
        self.eid = eid
        self.retired = retired
        self.retiredResolveUntil = retiredResolveUntil
        self.expiresAt = expiresAt
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
public protocol LedgerStore: CheckoutStore, Sendable {
    /// The policy this store enforces.
    var policy: LedgerPolicy { get }

    /// Creates the schema or brings it up to date. Servers call it once at start-up, before they accept requests;
    /// a store that only one process uses also releases the idempotency keys a crash left in flight then.
    func migrate() async throws

    /// Finds or creates the user with this e-mail address, with a wallet (development login). A disabled user is
    /// refused.
    func login(email: String) async throws -> LedgerUser

    /// The user with this e-mail address and password. Every refusal says the same (`unknownUser`), whichever of
    /// the two was wrong, and takes as long: an unknown address is checked against a hash of the same cost. A
    /// disabled account is refused (`forbidden`) only once its password was right.
    func login(email: String, password: String) async throws -> LedgerUser

    /// Open registration: creates an account with a password and a wallet whose address is not confirmed yet, and a
    /// confirmation code for it (stored as a digest), which the caller mails to the address. An address that an
    /// unconfirmed account holds gets the new password and a new code (whoever registered it first may not own it);
    /// a confirmed account's address, or one that looks like another account's (``ConfusableText/skeleton(_:)``),
    /// changes nothing. The password is hashed in every case, so the cases take alike. A malformed address, one that
    /// mixes scripts or holds compatibility forms, and a password the policy refuses are `invalidInput`.
    func register(email: String, password: String) async throws -> RegistrationOutcome

    /// Confirms the address of an account made by ``register(email:password:)`` with the code mailed to it and the
    /// password it was registered with, and returns the account. Every refusal is the same `unknownUser`, after the
    /// same work (unknown address, confirmed already, no code, expired code, wrong code, wrong password); a wrong
    /// code or password uses up one of the code's ``LedgerPolicy/confirmationAttempts``.
    func confirmRegistration(email: String, code: String, password: String) async throws -> LedgerUser

    /// A new refresh token for `userID`, the first of a new family; only its digest is stored.
    func issueRefreshToken(userID: String) async throws -> String

    /// Exchanges a refresh token for its user and the next token of its family. A token used before (or revoked)
    /// revokes its whole family: someone holds a copy. Unknown, expired, reused and revoked tokens and disabled users
    /// are all refused `unknownUser`.
    func refresh(token: String) async throws -> (user: LedgerUser, refreshToken: String)

    /// Revokes the family of a refresh token (logout); an unknown token is ignored.
    func logout(refreshToken: String) async throws

    // MARK: Administration (every change recorded in the audit log with its actor)

    /// Creates a user with a password and a wallet, as `actor`.
    func addUser(email: String, displayName: String?, password: String, actor: String) async throws -> LedgerUser

    /// Every user, oldest first.
    func users() async throws -> [UserSummary]

    /// Disables the user with this address and revokes its refresh tokens, as `actor`.
    func disableUser(email: String, actor: String) async throws

    /// Sets a new password for the user with this address and revokes its refresh tokens, as `actor`.
    func resetPassword(email: String, password: String, actor: String) async throws

    /// Sets the display name payers see as verified for the payee with this address, as `actor`.
    func verifyMerchant(email: String, name: String, actor: String) async throws

    /// The newest `limit` entries of the audit log, newest first.
    func auditLog(limit: Int) async throws -> [AuditEntry]

    /// The user with this id, if it exists.
    func user(id: String) async throws -> LedgerUser?

    /// The user's wallet: balance and the latest entries, newest first.
    func wallet(userID: String, recentLimit: Int) async throws -> Wallet

    /// One page of the user's entries, newest first: from the newest, or from `cursor` (an earlier page's
    /// ``WalletEntriesPage/nextCursor``); `limit` is 1 to ``EntryPageSize/maximum``. A cursor this server did not give, or gave for
    /// another wallet, is refused as invalid input.
    func entries(userID: String, cursor: String?, limit: Int) async throws -> WalletEntriesPage

    /// Credits the user from the system funding account through the ledger; returns the new balance.
    func fund(userID: String, amountCents: Cents) async throws -> Cents

    /// Creates a session asking `amountCents` for `payeeID`, with a fresh EID unique among live sessions.
    ///
    /// With an `idempotencyKey` (scoped to the payee, kept as long as the session) the payee's first session under
    /// that key is answered again instead, whatever its status since, so a retry never makes a second session for
    /// one charge; concurrent creates with one key make one session. The key with another amount, share count, tip
    /// prompt or reference is refused (422 ``LedgerError/Kind/idempotencyKeyReused``). Split into `shares` equal
    /// shares (1 to ``SessionSplit/maximumShares``, each at least a cent, else `invalid-shares`), each paid by
    /// whoever locks it.
    /// `tipPrompt` and `reference` (``OrderReference``, else `invalid-input`) are kept with the session and shown to
    /// its payers; a replay must ask for the same ones.
    /// - Returns: the session and whether it is the replay of an earlier create.
    func createSession(
        payeeID: String,
        amountCents: Cents,
        shares: Int,
        tipPrompt: TipPrompt,
        reference: String?,
        idempotencyKey: String?
    ) async throws -> (session: NewSession, replayed: Bool)

    /// Looks a live session up by EID: 404 if unknown, 410 if expired or cancelled, or if the EID was rotated away
    /// longer ago than the policy's ``LedgerPolicy/eidGrace`` (`eid-retired`).
    func resolve(eid: EID) async throws -> ResolvedSession

    /// Gives the live session `sid` a new EID, never given to any session before; payee only. The EIDs it had keep
    /// resolving for ``LedgerPolicy/eidGrace``, then answer 410 `eid-retired`.
    ///
    /// This is the one place a session's EID changes: the returned ``EIDRotation`` says what changed, for whoever
    /// announces it.
    func rotateEID(sid: String, payeeID: String) async throws -> EIDRotation

    /// Locks the session for `payerID`: first wins, lapses after the policy's lock lifetime. The payer's balance
    /// must cover this session and every other session it holds locked, or it is refused `insufficient-funds`.
    /// Of a split, it takes the first `shares` shares free for this payer (its own live locks among them; the rest
    /// of those are released), or is refused `no-free-share`; a session that is not split takes `shares` 1 only.
    func lock(sid: String, payerID: String, shares: Int) async throws -> LockedShares

    /// Releases `payerID`'s lock on the session, so another payer may lock it at once. Idempotent: the session's
    /// last holder (or its payer) is answered ok when there is no live lock left to release. Anyone else is refused:
    /// 409 `session-locked` while another payer holds it, 403 `forbidden` otherwise.
    func unlock(sid: String, payerID: String) async throws

    /// Admits and runs a payment of the session (of a split: of the shares the payer holds locked) with `tipCents`
    /// on top for the payee (0 to the amount paid, else `invalid-tip`), replaying a stored outcome when there is one.
    /// - Returns: the outcome and whether it is a replay.
    func send(sid: String, payerID: String, idempotencyKey: String, tipCents: Cents) async throws -> (SendOutcome, Bool)

    /// Pays what a page showed its payer, in one transaction (``ShownPayment``): the session, or one free share of
    /// a split of exactly the amount shown (the payer's own live lock first), with the tip on top; or nothing, with
    /// the amount it would take now, when that differs. Taps under one key wait for each other and pay once.
    func pay(shown payment: ShownPayment) async throws -> ShownPaymentOutcome

    /// The receipt a send answers (and each replay of it answers again), and the id of the payment when it paid
    /// shares of a split.
    func sentPayment(
        sid: String,
        payerID: String,
        idempotencyKey: String
    ) async throws
        -> (receipt: Receipt?, paymentID: String?)

    /// Returns the payments of every cancelled or expired split still owed them, up to `limit` sessions, each in a
    /// transaction of its own and exactly once however many servers run this; returns how many it returned.
    func returnDueSharePayments(limit: Int) async throws -> Int

    /// The session as its payee, its current lock holder or its payer (of a split: any of its payers, each seeing
    /// its own payments) sees it; 404 for anyone else.
    func session(sid: String, viewerID: String) async throws -> SessionView

    /// Cancels a live session; payee only.
    func cancel(sid: String, payeeID: String) async throws

    /// Where this store publishes the session changes it commits (and those it relays from other servers), for
    /// event streams.
    var changes: SessionChanges { get }

    /// The session as its event stream reads it; 404 `session-not-found` for anyone but its payee.
    func watchedSession(sid: String, payeeID: String) async throws -> WatchedSession

    /// Publishes into ``changes`` the changes other servers on the same database commit, until cancelled; returns at
    /// once for a database only this process uses.
    func relayChanges() async throws

    /// Deletes idempotency keys older than the retention; returns how many.
    func pruneIdempotencyKeys() async throws -> Int

    /// Deletes refresh tokens that have expired; returns how many.
    func pruneRefreshTokens() async throws -> Int

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

    /// Checks the store can be reached and written now, by committing one small write; throws the reason when it
    /// cannot (``LedgerError/Kind/databaseUnavailable``, ``LedgerError/Kind/storageFull``, or the database's error).
    func checkWritable() async throws

    // MARK: Deposits and payouts

    /// Credits the user with this e-mail address from the deposits account, as `actor` (recorded in the audit log).
    /// Idempotent by `reference`: the same reference again with the same user and amount is answered as the
    /// earlier deposit (``DepositResult/replayed``) and writes nothing; with another user or amount it is refused
    /// (``LedgerError/Kind/idempotencyKeyReused``).
    func deposit(email: String, amountCents: Cents, reference: String, actor: String) async throws -> DepositResult

    /// Moves `amountCents` from the user's wallet into the payouts clearing account at once, as a pending payout.
    /// Idempotent by `idempotencyKey` (scoped to the user): the same key and amount replays the first answer, the
    /// same key with another amount is refused (``LedgerError/Kind/idempotencyKeyReused``). A refusal (insufficient
    /// funds) moves nothing and keeps nothing under the key.
    /// - Returns: the answer and whether it is a replay.
    func requestPayout(
        userID: String,
        amountCents: Cents,
        idempotencyKey: String
    ) async throws -> (payout: Payout, replayed: Bool)

    /// The payouts in `status` (every one when `nil`), oldest first, at most `limit`.
    func payouts(status: PayoutStatus?, limit: Int) async throws -> [PayoutListing]

    /// Settles a pending payout, as `actor` (recorded in the audit log): its money leaves the clearing account for
    /// the settled-payouts account, off every wallet. A payout that is not pending is refused
    /// (``LedgerError/Kind/payoutNotPending``); of two concurrent settles or fails exactly one wins.
    func settlePayout(id: String, reference: String, actor: String) async throws -> PayoutRow

    /// Fails a pending payout, as `actor` (recorded in the audit log): its money goes back to the user. A payout
    /// that is not pending is refused (``LedgerError/Kind/payoutNotPending``).
    func failPayout(id: String, reason: String, actor: String) async throws -> PayoutRow

    // MARK: Refunds

    /// Refunds `amountCents` of paid session `sid` to its payer, as its payee `payeeID`; the same key with the same
    /// request replays the refund (`replayed`), with another request is refused `idempotency-key-reused`. Refused
    /// `session-not-paid`, `refund-exceeds-payment` (the session's refunds would add up to more than was paid),
    /// `insufficient-funds` (the payee's balance), `forbidden` (not the payee).
    /// Of a split, `paymentID` names the payment refunded (required; at most its amount and tip less what was
    /// refunded of it).
    func refund(
        sid: String,
        payeeID: String,
        amountCents: Cents,
        paymentID: String?,
        idempotencyKey: String
    ) async throws -> (refund: Refund, replayed: Bool)

    // MARK: Credentials

    /// Creates an API key acting for the user with the e-mail address `email` within `scopes`, as `actor` (recorded
    /// in the audit log). The secret is returned here and nowhere else: the store keeps only its hash.
    func createAPIKey(
        email: String,
        name: String,
        scopes: Set<APIKeyScope>,
        actor: String
    ) async throws -> (key: APIKey, secret: String)

    /// The API keys of the user with this e-mail address, or every key when `nil`, oldest first.
    func apiKeys(email: String?) async throws -> [APIKey]

    /// Revokes the API key with this id (again, if revoked already), as `actor` (recorded in the audit log); it
    /// authenticates nothing from now on.
    func revokeAPIKey(id: String, actor: String) async throws -> APIKey

    /// Who an API key's secret acts as: `nil` for a secret that is unknown, malformed or revoked, or whose user is
    /// disabled. Records the key's
    /// use (at most once per ``APIKeySecret/lastUsedResolution``).
    func principal(apiKey secret: String) async throws -> LedgerPrincipal?

    /// The user of an external identity (`subject` at `issuer`), provisioned with a wallet on first use.
    func user(issuer: String, subject: String, displayName: String) async throws -> LedgerUser

    /// The session as `principal` sees it: a user as ``session(sid:viewerID:)`` says, an API key only its payee's
    /// sessions (with the `sessions:read` scope).
    func session(sid: String, principal: LedgerPrincipal) async throws -> SessionView

    /// Tells `observer` how long each transaction takes, from now on.
    func observe(_ observer: any LedgerStoreObserver)

    /// How the store's connections are used now; `nil` where it has nothing to report.
    func poolUsage() async -> LedgerPoolUsage?

    // MARK: Webhooks

    /// Woken each time a transaction of this store that wrote webhook events commits.
    var webhookOutbox: WebhookOutboxSignal { get }

    /// Registers an endpoint of `userID` for `events` (``WebhookEventType`` raw values, or ``WebhookEventType/all``),
    /// with a new secret, returned here and nowhere else. Refused `invalidInput` for a malformed URL or event type,
    /// and beyond ``LedgerPolicy/maximumWebhookEndpoints``. Whether the URL may be reached is the caller's to check.
    func createWebhookEndpoint(
        userID: String,
        url: String,
        events: [String]
    ) async throws -> (endpoint: WebhookEndpoint, secret: String)

    /// The endpoints of `userID`, oldest first, without their secrets.
    func webhookEndpoints(userID: String) async throws -> [WebhookEndpoint]

    /// Enrolls a terminal's Ed25519 public key (32 raw bytes) under `payeeID` as `name`. Refused `invalidInput` for a
    /// bad name, a key that is not one, or a key enrolled already.
    func enrollTerminal(payeeID: String, name: String, publicKey: Data) async throws -> TerminalRow

    /// The terminals of `payeeID`, oldest first, revoked ones included.
    func terminals(payeeID: String) async throws -> [TerminalRow]

    /// The terminal whose key has this id, revoked or not.
    func terminal(keyID: String) async throws -> TerminalRow?

    /// Revokes a terminal of `payeeID`; `notFound` for an id that is unknown or another payee's.
    func revokeTerminal(id: String, payeeID: String) async throws -> TerminalRow

    /// What a payer is shown of a charge a terminal signed: its session, payee, terminal and whether it may be paid.
    /// `notFound` for a key no terminal enrolled, `invalidInput` for a signature that does not verify or another
    /// currency.
    func resolveCharge(_ charge: TerminalCharge) async throws -> ChargeView

    /// Pays a charge a terminal signed, as `payerID`: its session is opened once per charge and paid as shown, each
    /// step idempotent. Refused as ``resolveCharge(_:)``, and `forbidden` (terminal revoked) or `sessionExpired` for
    /// a charge whose session was never opened.
    func payCharge(
        _ charge: TerminalCharge,
        payerID: String,
        idempotencyKey: String,
        tipCents: Cents
    ) async throws -> ShownPaymentOutcome

    /// For an operator: the endpoints of the user with this e-mail address, or of every user when `nil`, oldest first.
    func webhookEndpoints(email: String?) async throws -> [WebhookEndpoint]

    /// Deletes an endpoint of `userID`: no delivery goes to it from now on, and its pending ones fail. `notFound` for
    /// an id that is unknown, deleted or another user's.
    func deleteWebhookEndpoint(id: String, userID: String) async throws

    /// Gives an endpoint of `userID` a new secret, returned here and nowhere else; the one it replaces is still
    /// signed with for ``WebhookSecrets/rotationOverlap``. `notFound` as for a delete.
    func rotateWebhookSecret(id: String, userID: String) async throws -> (endpoint: WebhookEndpoint, secret: String)

    /// What deliveries to the endpoint are signed with now. `notFound` for an unknown or deleted endpoint.
    func webhookSecrets(endpointID: String) async throws -> WebhookSigningSecrets

    /// Up to `limit` deliveries to the endpoint, newest first; of `userID`'s endpoints only (`nil`: an operator's
    /// look at any). `notFound` for an endpoint that is unknown, deleted or another user's.
    func webhookDeliveries(endpointID: String, userID: String?, limit: Int) async throws -> [WebhookDelivery]

    /// Makes a delivery pending again and due now (whatever its status), voiding any lease on it; of `userID`'s
    /// endpoints only (`nil`: an operator). `notFound` as for the list; `invalidInput` when its endpoint is deleted.
    func retryWebhookDelivery(id: String, userID: String?) async throws -> WebhookDelivery

    /// Leases up to `limit` due deliveries to this worker for `lease`, earliest due first, at most `perEndpoint` in
    /// flight per endpoint across every server, each to one worker at a time: a delivery whose lease lapsed is
    /// claimable again (at least once). Deliveries to disabled or deleted endpoints are not claimed.
    func claimWebhookDeliveries(limit: Int, perEndpoint: Int, lease: Duration) async throws -> [ClaimedWebhookDelivery]

    /// Records how an attempt under a claim's lease ended (and releases the lease). A failure starts or continues
    /// the endpoint's failing time; one past ``LedgerPolicy/webhookDisableAfter`` of it disables the endpoint, with
    /// an audit entry. Not recorded when the lease is no longer the delivery's.
    func recordWebhookAttempt(
        deliveryID: String,
        leaseToken: String,
        outcome: WebhookAttemptOutcome
    ) async throws -> WebhookAttemptResult

    /// Disables an endpoint, as `actor` (recorded in the audit log), for `reason`.
    func disableWebhookEndpoint(id: String, actor: String, reason: String) async throws -> WebhookEndpoint

    /// Enables a disabled endpoint again, its failing time forgotten, as `actor` (recorded in the audit log); its
    /// pending deliveries resume.
    func enableWebhookEndpoint(id: String, actor: String) async throws -> WebhookEndpoint

    /// The event with this id and its data as domain values: the session as its payee sees it now (with the
    /// payment's receipt), the refund, the payout or the deposit. `notFound` for an unknown event.
    func webhookEvent(id: String) async throws -> WebhookEventDetail

    /// Stores the body every delivery of the event sends, unless one is stored already; returns the one stored.
    func pinWebhookBody(eventID: String, body: Data) async throws -> Data

    /// Notes up to `limit` sessions whose expiry passed unpaid and uncancelled, writing each one's `session.expired`
    /// event, in one transaction and once for each session however many servers run it; returns how many.
    func markExpiredSessions(limit: Int) async throws -> Int
}

extension LedgerStore {
    /// Tells `observer` of every transaction from now on (see ``LedgerEngine/observe(_:)``); stores without
    /// transactions of their own ignore it.
    public func observe(_ observer: any LedgerStoreObserver) {}

    /// How the store's connections are used now; `nil` where the store has none to report.
    public func poolUsage() async -> LedgerPoolUsage? { nil }
}

extension LedgerStore {
    /// Creates a session that suggests no tip
    /// (``createSession(payeeID:amountCents:shares:tipPrompt:reference:idempotencyKey:)``).
    public func createSession(
        payeeID: String,
        amountCents: Cents,
        shares: Int,
        idempotencyKey: String?
    ) async throws -> (session: NewSession, replayed: Bool) {
        try await createSession(
            payeeID: payeeID,
            amountCents: amountCents,
            shares: shares,
            tipPrompt: .none,
            reference: nil,
            idempotencyKey: idempotencyKey
        )
    }

    /// Creates a session of one share, paid by one payer, that suggests no tip
    /// (``createSession(payeeID:amountCents:shares:tipPrompt:reference:idempotencyKey:)``).
    public func createSession(
        payeeID: String,
        amountCents: Cents,
        idempotencyKey: String?
    ) async throws -> (session: NewSession, replayed: Bool) {
        try await createSession(payeeID: payeeID, amountCents: amountCents, shares: 1, idempotencyKey: idempotencyKey)
    }

    /// Locks the session, or one share of a split, for `payerID` (``lock(sid:payerID:shares:)``).
    public func lock(sid: String, payerID: String) async throws {
        _ = try await lock(sid: sid, payerID: payerID, shares: 1)
    }

    /// Pays without a tip (``send(sid:payerID:idempotencyKey:tipCents:)``).
    public func send(sid: String, payerID: String, idempotencyKey: String) async throws -> (SendOutcome, Bool) {
        try await send(sid: sid, payerID: payerID, idempotencyKey: idempotencyKey, tipCents: 0)
    }

    /// Refunds a session that is not split (``refund(sid:payeeID:amountCents:paymentID:idempotencyKey:)``).
    public func refund(
        sid: String,
        payeeID: String,
        amountCents: Cents,
        idempotencyKey: String
    ) async throws -> (refund: Refund, replayed: Bool) {
        try await refund(
            sid: sid,
            payeeID: payeeID,
            amountCents: amountCents,
            paymentID: nil,
            idempotencyKey: idempotencyKey
        )
    }
}
