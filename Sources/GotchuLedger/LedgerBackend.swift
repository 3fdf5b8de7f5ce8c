package import Foundation
package import GotchuCore
package import GotchuReceipts

/// The database under a ``LedgerEngine``: transactions and the row reads and writes the engine's rules are made of,
/// and nothing else. The rules (what is checked, in which order, what is written) live once in the engine; a
/// backend contributes its SQL dialect, its schema and migrations, and the few places where the databases differ
/// (row locks, advisory locks, how an interrupted request's idempotency key is recovered).
package protocol LedgerBackend: BrowserSessionBackend, Sendable {
    /// One transaction's access to the database.
    associatedtype Transaction: LedgerTransaction

    /// Creates the schema or brings it up to date.
    func migrate() async throws

    /// Runs `body` in a read-write transaction with the store's time read at its start; commits if it returns, rolls
    /// back and rethrows if it throws. Every row a decision depends on is read through the transaction, with
    /// `forUpdate` where the rules say so, so each check still holds at commit.
    func transaction<T: Sendable>(_ body: (Transaction) async throws -> T) async throws -> T

    /// The store's time for a read outside a transaction, in milliseconds since 1970.
    func now() async throws -> Int64

    /// The user with this id, if any.
    func user(id: String) async throws -> LedgerUser?

    /// The user's wallet with its latest entries, newest first, read in one snapshot; `nil` for an unknown user.
    func wallet(userID: String, recentLimit: Int) async throws -> Wallet?

    /// Up to `limit` of the user's entries older than the entry at `before` (all when `nil`), newest first, each
    /// with the wallet on the other side of its transfer and that wallet's owner, read in one snapshot with whether
    /// `before` names an entry of this user's wallet; `nil` for an unknown user. Served by the index on
    /// `(wallet_id, seq)`.
    func entries(userID: String, before: EntryCursor?, limit: Int) async throws -> EntryHistoryPage?

    /// The session that was given `eid`, with its payee's name, e-mail address and verified name, and when the EID
    /// was rotated away (`nil` while it is the session's current one). EIDs are never given twice; of rows written
    /// before that rule, the newest session's; with the store's time of the read.
    func session(eid: EID) async throws -> EIDSession?

    /// The user with this (normalized) e-mail address and its password hash, if any.
    func credentials(email: String) async throws -> UserCredentials?

    /// Every user, oldest first.
    func users() async throws -> [UserSummary]

    /// The newest `limit` audit entries, newest first.
    func auditLog(limit: Int) async throws -> [AuditEntry]

    /// The session with this id, outside a transaction.
    func session(id: String) async throws -> SessionRow?

    /// The EIDs the session was given, oldest first, with when each was rotated away, outside a transaction.
    func eids(sessionID: String) async throws -> [SessionEID]

    /// Recomputes the invariants from the entries, in one snapshot.
    func audit() async throws -> LedgerAudit

    // MARK: Credentials

    /// The API key whose secret hashes to `hash` (``APIKeySecret/hash(_:)``), revoked or not, and the store's time
    /// (read with it: authenticating a key is one round trip).
    func apiKey(hash: String) async throws -> (key: APIKey, now: Int64)?

    /// The API keys of `userID`, or every key when `nil`, oldest first.
    func apiKeys(userID: String?) async throws -> [APIKey]

    /// The user provisioned for the external identity `subject` at `issuer`, if any.
    func user(issuer: String, subject: String) async throws -> LedgerUser?

    /// Every row `gotchu ledger verify` checks, read in one snapshot.
    func snapshot() async throws -> LedgerSnapshot

    /// The receipt of this kind stored for the session (the first, where a kind may have several), if any.
    func receipt(sessionID: String, kind: ReceiptKind) async throws -> StoredReceipt?

    /// Every receipt key, newest first.
    func receiptKeys() async throws -> [ReceiptKeyRow]

    /// The sum of the DEBIT entries of type `entryType` that reference (`refType`, `refID`), outside a transaction:
    /// what the money movements of that kind for that row add up to (served by the index on `(ref_type, ref_id)`).
    func debitedCents(refType: String, refID: String, entryType: String) async throws -> Cents

    /// Checks the database answers.
    func ping() async throws

    /// The shares of a split session, the first first, outside a transaction (none for a session of one share).
    func shares(sessionID: String) async throws -> [ShareRow]

    /// Up to `limit` split sessions cancelled, or expired by `now`, with shares paid and payments not yet all
    /// returned (``SessionRow/refundsSweptAt`` unset), served by their partial index.
    func sessionsOwedRefunds(now: Int64, limit: Int) async throws -> [String]

    /// The split payment `userID` made under its send's idempotency key `key`, if that send paid one.
    func paymentID(userID: String, key: String) async throws -> String?

    /// The stored receipt with this id, if any.
    func receipt(id: String) async throws -> StoredReceipt?

    /// What the refunds of each payment of split session `sessionID` returned, by payment id.
    func refundedCentsByPayment(sessionID: String) async throws -> [String: Cents]

    /// Commits one small write (the time of this check, in a table of its own), proving the database takes writes
    /// now: reachable, not read-only, and with room on its disk.
    func checkWritable() async throws

    /// The payouts in `status` (every one when `nil`), oldest first, at most `limit`, with their users' addresses.
    func payouts(status: PayoutStatus?, limit: Int) async throws -> [PayoutListing]

    /// Publishes into `changes` the session changes other servers on this database commit, until cancelled; returns
    /// at once where the database is this process's alone (the engine publishes its own changes).
    func relayChanges(to changes: SessionChanges) async throws

    /// How the backend's connections are used now, for metrics; `nil` where it has nothing to report.
    func poolUsage() async -> LedgerPoolUsage?

    // MARK: Webhooks

    /// The endpoint with this id, deleted or not, with its secrets.
    func webhookEndpoint(id: String) async throws -> WebhookEndpointRow?

    /// The endpoints of `userID` (of every user when `nil`) that are not deleted, oldest first.
    func webhookEndpoints(userID: String?) async throws -> [WebhookEndpointRow]

    /// Up to `limit` deliveries to the endpoint, newest first.
    func webhookDeliveries(endpointID: String, limit: Int) async throws -> [WebhookDelivery]

    /// The event with this id, with its pinned body, if any.
    func webhookEvent(id: String) async throws -> WebhookEvent?

    /// Whether some pending delivery is due by `now` and not leased: a read that spares a claim's transaction when
    /// nothing is (it may say yes for a delivery whose endpoint is disabled).
    func webhookDeliveriesDue(now: Int64) async throws -> Bool

    /// Whether some session's expiry passed by `now` unpaid, uncancelled and not yet noted: a read that spares the
    /// expiry sweep's transaction when none did.
    func sessionExpiriesDue(now: Int64) async throws -> Bool

    /// The refund with this id, with its receipt's body.
    func refund(id: String) async throws -> RefundRow?

    /// The payout with this id.
    func payout(id: String) async throws -> PayoutRow?

    /// The deposit with this id.
    func deposit(id: String) async throws -> DepositRow?
}

extension LedgerBackend {
    /// A backend whose database no other server writes: there is nothing to relay, so it returns at once.
    package func relayChanges(to changes: SessionChanges) async throws {}

    /// A backend that does not report its connections.
    package func poolUsage() async -> LedgerPoolUsage? { nil }
}

/// One transaction's primitives. Times are the transaction's ``now``.
package protocol LedgerTransaction: BrowserSessionTransaction {
    /// The store's time at the start of the transaction, in milliseconds since 1970.
    var now: Int64 { get }

    // MARK: Users and wallets

    /// The user with this (normalized) e-mail address, if any.
    func user(email: String) async throws -> LedgerUser?

    /// The user with this id, if any.
    func user(id: String) async throws -> LedgerUser?

    /// Inserts a user whose address has the skeleton `skeleton` (``ConfusableText/skeleton(_:)``), its address
    /// confirmed at ``now`` when `confirmed`; `false` if the address or the skeleton is taken (a concurrent first
    /// login won, or another account's address looks the same).
    func insert(user: LedgerUser, email: String, skeleton: String, confirmed: Bool) async throws -> Bool

    /// Whether the user's e-mail address is confirmed; `nil` for an unknown user.
    func emailConfirmed(userID: String) async throws -> Bool?

    /// The user as a session's payee, in one read: whether its e-mail address is confirmed, and how payers are
    /// shown it; `nil` for an unknown user.
    func payee(userID: String) async throws -> (confirmed: Bool, payee: PayeeRow)?

    /// Marks the user's e-mail address confirmed at ``now``.
    func confirmEmail(userID: String) async throws

    /// The user's pending e-mail confirmation, locked until the transaction ends where the database locks rows.
    func emailConfirmation(userID: String) async throws -> EmailConfirmationRow?

    /// Inserts the user's pending e-mail confirmation, replacing the one it had.
    func replace(emailConfirmation: EmailConfirmationRow) async throws

    /// Sets how many tries the user's pending e-mail confirmation has left.
    func setConfirmationAttempts(_ attemptsLeft: Int, userID: String) async throws

    /// Deletes the user's pending e-mail confirmation.
    func deleteEmailConfirmation(userID: String) async throws

    /// Up to `limit` users stored before addresses had skeletons, oldest first, with their addresses.
    func usersWithoutSkeleton(limit: Int) async throws -> [(id: String, email: String)]

    /// Sets the skeleton of a user's address unless another user's address has it; `false` if one does.
    func setSkeleton(_ skeleton: String, userID: String) async throws -> Bool

    /// Inserts a user's empty wallet.
    func insertWallet(id: String, userID: String) async throws

    /// Sets the user's password hash.
    func setPassword(userID: String, hash: String) async throws

    /// Sets the user's password hash to `new` if it is still `old`.
    func replacePassword(userID: String, hash old: String, with new: String) async throws

    /// Marks the user disabled from ``now``.
    func disable(userID: String) async throws

    /// Sets the user's verified display name.
    func setVerifiedName(userID: String, name: String) async throws

    // MARK: Refresh tokens and the audit log

    /// Inserts a refresh token.
    func insert(refreshToken: RefreshTokenRow) async throws

    /// The refresh token with this digest, locked until the transaction ends where the database locks rows.
    func refreshToken(digest: String) async throws -> RefreshTokenRow?

    /// Marks a refresh token used at ``now``.
    func markUsed(refreshToken digest: String) async throws

    /// Revokes at ``now`` every unrevoked token of the family.
    func revokeRefreshTokens(familyID: String) async throws

    /// Revokes at ``now`` every unrevoked token of the user.
    func revokeRefreshTokens(userID: String) async throws

    /// Refuses from ``now`` on every access token of the user issued before (``LedgerUser/tokensNotBefore``).
    func revokeAccessTokens(userID: String) async throws

    /// Deletes refresh tokens that expired before `time`; returns how many.
    func deleteRefreshTokens(expiredBefore time: Int64) async throws -> Int

    /// Appends an entry to the audit log.
    func insert(audit: AuditEntry) async throws

    /// The user's wallet, unlocked.
    func wallet(userID: String) async throws -> WalletRow?

    /// The system accounts with these ids and the wallets of these users, locked until the transaction ends, in id
    /// order (the one lock order of wallets).
    func walletsForUpdate(accountIDs: [String], userIDs: [String]) async throws -> [WalletRow]

    /// Sets the balances of the wallets of a transfer.
    func setBalances(_ balances: [(walletID: String, balance: Cents)]) async throws

    /// Inserts the entries of one transfer.
    func insert(entries: [EntryRow]) async throws

    // MARK: Sessions

    /// The session with this id, locked until the transaction ends when `forUpdate`.
    func session(id: String, forUpdate: Bool) async throws -> SessionRow?

    /// The payee's session made under the create key `key`, with its current EID.
    func keyedSession(payeeID: String, key: String) async throws -> KeyedSession?

    /// Serializes the allocation of `eid` with every other transaction allocating it (no-op where the database has
    /// one writer).
    func lockEID(_ eid: EID) async throws

    /// Whether `eid` was ever given to a session: EIDs are never reused, so nothing links a new session to an EID
    /// heard before.
    func isAllocated(eid: EID) async throws -> Bool

    /// The EIDs the session was given, oldest first, with when each was rotated away.
    func eids(sessionID: String) async throws -> [SessionEID]

    /// Marks the session's current EIDs as rotated away at ``now``.
    func retireEIDs(sessionID: String) async throws

    /// Inserts a session advertising from ``now``; `false` if the payee's create key is taken.
    func insert(session: SessionRow, createKey: String?) async throws -> Bool

    /// Records that the session advertises `eid` from ``now``.
    func insert(eid: EID, sessionID: String) async throws

    /// Serializes one payer's locks, so two at once cannot both see room under the cap (no-op where the database has
    /// one writer).
    func lockPayer(_ payerID: String) async throws

    /// How many live locks the payer holds at ``now`` on other sessions and on shares of other split sessions, and
    /// what they add up to.
    func locksHeld(by payerID: String, excluding sid: String) async throws -> (count: Int, amount: Cents)

    /// Inserts the shares of a new split session.
    func insert(shares: [ShareRow]) async throws

    /// The shares of a split session, the first first (none for a session of one share). Read under the session's
    /// row lock, which every change of its shares takes first.
    func shares(sessionID: String) async throws -> [ShareRow]

    /// Writes a change of the shares numbered `numbers` of split session `sessionID`.
    func update(shares numbers: [Int], sessionID: String, _ change: ShareChange) async throws

    /// What the refunds of split payment `paymentID` returned so far, by its `refunds` rows.
    func refundedCents(paymentID: String) async throws -> Cents

    /// The sum of the entries of type `entryType` that reference (`refType`, `refID`) on the wallet of `userID`:
    /// what one payer paid into a session or was refunded of it, by the money movements themselves.
    func entryCents(refType: String, refID: String, entryType: String, userID: String) async throws -> Cents

    /// Writes a change of a session's state.
    func update(session sid: String, _ change: SessionChange) async throws

    // MARK: Idempotency keys

    /// Takes the transaction-scoped lock on a key; `false` if another transaction holds it and `wait` is off. A
    /// payment's key is never committed in flight: admission, payment and outcome commit together, and "in flight"
    /// is this lock, which the database drops with the transaction, also when its connection dies. With `wait`, the
    /// lock is waited for instead, so the caller then reads the other transaction's outcome under the key.
    func claimKey(userID: String, key: String, wait: Bool) async throws -> Bool

    /// The key's row, locked until the transaction ends where the database locks rows.
    func idempotencyRecord(userID: String, key: String) async throws -> IdempotencyRecord?

    /// Inserts the key in flight for `sid`; `false` if it exists (a concurrent first use won).
    func insertInFlight(userID: String, key: String, sid: String) async throws -> Bool

    /// Marks an abandoned key's request as running again from ``now``.
    func touch(userID: String, key: String) async throws

    /// Deletes the key.
    func delete(userID: String, key: String) async throws

    /// Writes the key's outcome (with the split payment it made, if any), inserting the row if it was released
    /// meanwhile.
    func record(outcome: SendOutcome, paymentID: String?, userID: String, key: String, sid: String) async throws

    /// Deletes keys created before `time`; returns how many.
    func deleteKeys(createdBefore time: Int64) async throws -> Int

    // MARK: Credentials

    /// Inserts an API key, created at ``now``, whose secret hashes to `hash`.
    func insert(apiKey: APIKey, hash: String) async throws

    /// The API key with this id, if any.
    func apiKey(id: String) async throws -> APIKey?

    /// Writes a change of an API key at ``now``.
    func update(apiKey id: String, _ change: APIKeyChange) async throws

    /// The user provisioned for the external identity `subject` at `issuer`, if any.
    func user(issuer: String, subject: String) async throws -> LedgerUser?

    /// Links the external identity to `userID`; `false` if it is linked already (a concurrent first use won).
    func insertIdentity(issuer: String, subject: String, userID: String) async throws -> Bool

    // MARK: Terminals

    /// Inserts a terminal; `false` when its key is enrolled already (by any payee), and nothing is written.
    func insert(terminal: TerminalRow) async throws -> Bool

    /// The terminal with this id, its row locked until the transaction ends; `nil` if none.
    func terminal(id: String) async throws -> TerminalRow?

    /// The terminal whose key has this id (``TerminalRow/keyID``), revoked or not.
    func terminal(keyID: String) async throws -> TerminalRow?

    /// The terminals of `payeeID`, oldest first, revoked ones included.
    func terminals(payeeID: String) async throws -> [TerminalRow]

    /// Revokes a terminal at ``now``; one revoked already keeps its first time.
    func revoke(terminal id: String) async throws

    /// Tells the other servers on this database, if the transaction commits, that session `sid` may have changed
    /// (no-op where the database is this process's alone).
    func announce(sid: String, _ notice: SessionNotice) async throws

    // MARK: Deposits and payouts

    /// The deposit with this external reference, if any.
    func deposit(reference: String) async throws -> DepositRow?

    /// Inserts a deposit; `false` if its reference is taken (a concurrent first use won: where the database locks
    /// rows, the insert waits for it to commit).
    func insert(deposit: DepositRow) async throws -> Bool

    /// The user's payout requested under `key`, if any.
    func payout(userID: String, key: String) async throws -> PayoutRow?

    /// The payout with this id, locked until the transaction ends when `forUpdate`.
    func payout(id: String, forUpdate: Bool) async throws -> PayoutRow?

    /// Inserts a payout.
    func insert(payout: PayoutRow) async throws

    /// Records that a pending payout was settled or failed at ``now``.
    func resolve(
        payout id: String,
        status: PayoutStatus,
        reference: String?,
        reason: String?,
        actor: String
    )
        async throws

    // MARK: Hash chain and receipts

    /// The chain's head, locked until the transaction ends: every transfer reads it here, after its wallets, so
    /// concurrent transfers chain one after another and no two take the same previous hash.
    func chainHeadForUpdate() async throws -> ChainHead

    /// Moves the chain's head.
    func setChainHead(_ head: ChainHead) async throws

    /// Up to `limit` entries written before the chain existed (no hash yet), oldest first.
    func unchainedEntries(limit: Int) async throws -> [StoredEntry]

    /// Stores the chain hashes of entries written before the chain existed.
    func setHashes(_ hashes: [(seq: Int64, hash: String)]) async throws

    /// Serializes the creation and rotation of receipt keys (no-op where the database has one writer).
    func lockReceiptKeys() async throws

    /// Every receipt key, newest first.
    func receiptKeys() async throws -> [ReceiptKeyRow]

    /// Inserts a receipt key.
    func insert(receiptKey: ReceiptKeyRow) async throws

    /// Retires every key but `keyID` at ``now`` and erases their private halves; their public halves stay.
    func retireReceiptKeys(except keyID: String) async throws

    /// Inserts a signed receipt.
    func insert(receipt: StoredReceipt) async throws

    // MARK: Refunds

    /// The refund `requestedBy` made under the idempotency key `key`, with its receipt's body, if any.
    func refund(requestedBy: String, key: String) async throws -> RefundRow?

    /// The sum of the DEBIT entries of type `entryType` that reference (`refType`, `refID`): what the money movements
    /// of that kind for that row add up to, read from the ledger itself rather than from any table beside it (the
    /// caller holds the referenced row locked, so no transfer of it commits meanwhile).
    func debitedCents(refType: String, refID: String, entryType: String) async throws -> Cents

    /// Inserts a refund; `false` if its requester's key is taken (a concurrent first use won).
    func insert(refund: RefundRow) async throws -> Bool

    // MARK: Webhooks

    /// The transactional outbox's one write: inserts `event` and one pending delivery of it, due at ``now``, for each
    /// endpoint of the event's user that is neither disabled nor deleted and subscribes to its type or to every type
    /// (``WebhookEventType/all``). Where the database defers writes, this costs no round trip of its own.
    func insert(webhookEvent event: WebhookEvent) async throws

    /// Up to `limit` sessions whose expiry passed by ``now`` unpaid and uncancelled (stored as created, advertising or
    /// locked) and not yet noted (``SessionChange/expiryNoted``), earliest expiry first, locked until the transaction
    /// ends; rows another transaction holds locked are skipped, not waited for.
    func expiredSessionsForUpdate(limit: Int) async throws -> [SessionRow]

    /// How many endpoints `userID` has that are not deleted.
    func webhookEndpointCount(userID: String) async throws -> Int

    /// Inserts an endpoint, created at ``now``, with its subscriptions.
    func insert(webhookEndpoint row: WebhookEndpointRow) async throws

    /// The endpoint with this id, deleted or not, locked until the transaction ends when `forUpdate` (a lock that
    /// does not keep deliveries from referencing it).
    func webhookEndpoint(id: String, forUpdate: Bool) async throws -> WebhookEndpointRow?

    /// Writes a change of an endpoint at ``now``.
    func update(webhookEndpoint id: String, _ change: WebhookEndpointChange) async throws

    /// Marks every pending delivery to the endpoint failed without an attempt, for `reason`.
    func abandonWebhookDeliveries(endpointID: String, reason: String) async throws

    /// The delivery with this id, locked until the transaction ends when `forUpdate`.
    func webhookDelivery(id: String, forUpdate: Bool) async throws -> WebhookDeliveryRow?

    /// Up to `limit` pending deliveries due by ``now``, not leased (or their lease lapsed), to endpoints that are
    /// enabled and hold fewer than `perEndpoint` live leases, earliest due first, locked until the transaction ends;
    /// rows another transaction holds locked are skipped, not waited for.
    func dueWebhookDeliveries(limit: Int, perEndpoint: Int) async throws -> [WebhookDeliveryRow]

    /// Locks the endpoints with these ids until the transaction ends, skipping those another transaction holds
    /// locked (a claim on another server), and returns those it locked.
    func lockWebhookEndpoints(ids: [String]) async throws -> [WebhookEndpointRow]

    /// How many pending deliveries of each of these endpoints are leased at ``now``, by endpoint (none: absent).
    func leasedWebhookDeliveries(endpointIDs: [String]) async throws -> [String: Int]

    /// Writes a change of these deliveries at ``now``.
    func update(webhookDeliveries ids: [String], _ change: WebhookDeliveryChange) async throws

    /// The events with these ids, with their pinned bodies.
    func webhookEvents(ids: [String]) async throws -> [WebhookEvent]

    /// Stores `body` as the event's body unless it has one, and returns the one it has now; `nil` for an unknown
    /// event.
    func pinWebhookBody(eventID: String, body: Data) async throws -> Data?
}

extension LedgerTransaction {
    /// A transaction whose database no other server reads: nobody to tell, so it does nothing.
    package func announce(sid: String, _ notice: SessionNotice) async throws {}

    /// Inserts a user with a confirmed address; `false` if the address, or one that looks the same, is taken.
    package func insert(user: LedgerUser, email: String) async throws -> Bool {
        try await insert(user: user, email: email, skeleton: ConfusableText.skeleton(email), confirmed: true)
    }
}

/// A change of an API key's stored state, at the transaction's time.
package enum APIKeyChange: Sendable, Hashable {
    /// It authenticated a request.
    case used
    /// It was revoked (kept only when not revoked already).
    case revoked
}

/// A session found by one of its EIDs.
package struct EIDSession: Sendable, Hashable {
    /// The session.
    package var session: SessionRow
    /// Its payee as payers are shown it.
    package var payee: PayeeRow
    /// When the EID was rotated away; `nil` while current.
    package var retiredAt: Int64?
    /// The store's time when the row was read, which a resolve judges expiry by: where that clock is the database's,
    /// it comes with the row, in one round trip.
    package var readAt: Int64

    /// A row as read from the database at `readAt`.
    package init(session: SessionRow, payee: PayeeRow, retiredAt: Int64?, readAt: Int64) {
        self.session = session
        self.payee = payee
        self.retiredAt = retiredAt
        self.readAt = readAt
    }
}

/// A `session_eids` row.
package struct SessionEID: Sendable, Hashable {
    /// The EID.
    package var eid: String
    /// When it was rotated away; `nil` while current.
    package var retiredAt: Int64?

    /// A row as read from the database.
    package init(eid: String, retiredAt: Int64?) {
        self.eid = eid
        self.retiredAt = retiredAt
    }
}

/// A `receipt_keys` row.
package struct ReceiptKeyRow: Sendable, Hashable {
    /// The key id (``ReceiptPublicKey/keyID(rawPublicKey:)``).
    package var id: String
    /// The raw public key, base64url.
    package var publicKey: String
    /// The raw private key, base64url; `nil` once the key is retired.
    package var privateKey: String?
    /// When the key was made: milliseconds since 1970 on the store's clock.
    package var createdAt: Int64
    /// When a newer key replaced it for signing, in milliseconds since 1970 on the store's clock; `nil` for the key
    /// that signs now.
    package var retiredAt: Int64?

    /// A row as read from the database.
    package init(id: String, publicKey: String, privateKey: String?, createdAt: Int64, retiredAt: Int64?) {
        self.id = id
        self.publicKey = publicKey
        self.privateKey = privateKey
        self.createdAt = createdAt
        self.retiredAt = retiredAt
    }

    /// The published half.
    package var published: ReceiptPublicKey {
        ReceiptPublicKey(rawPublicKey: Base64URL.decode(publicKey) ?? Data(), keyID: id)
    }
}

/// The ledger's system accounts, which every schema creates.
package enum LedgerAccounts {
    /// The system account money enters from when `/dev/fund` credits a wallet; it alone may go below zero, so the
    /// sum over all accounts stays zero.
    package static let fundingWalletID = "system:funding"
}

/// A wallet named by its owner, or a system account by its id.
enum WalletOwner: Sendable, Hashable {
    /// The wallet of the user with this id.
    case user(String)
    /// The system account with this wallet id, such as ``LedgerAccounts/fundingWalletID``.
    case account(String)

    /// The account ids and user ids of `owners`, as ``LedgerTransaction/walletsForUpdate(accountIDs:userIDs:)``
    /// takes them.
    static func split(_ owners: [WalletOwner]) -> (accountIDs: [String], userIDs: [String]) {
        var accountIDs: [String] = []
        var userIDs: [String] = []
        for owner in owners {
            switch owner {
            case .user(let user): userIDs.append(user)
            case .account(let account): accountIDs.append(account)
            }
        }
        return (accountIDs, userIDs)
    }

    func owns(_ wallet: WalletRow) -> Bool {
        switch self {
        case .user(let user): wallet.userID == user
        case .account(let account): wallet.id == account
        }
    }
}

/// A `wallet_accounts` row.
package struct WalletRow: Sendable, Hashable {
    /// The wallet's id: a UUID for a user's wallet, a name such as ``LedgerAccounts/fundingWalletID`` for a system
    /// account.
    package var id: String
    /// The owner; `nil` for a system account.
    package var userID: String?
    /// The balance, in cents: the sum of its credits less its debits, never below zero for a user's wallet.
    package var balance: Cents
    /// Whether a user or the system owns it.
    package var kind: WalletKind

    /// A row as read from the database.
    package init(id: String, userID: String?, balance: Cents, kind: WalletKind) {
        self.id = id
        self.userID = userID
        self.balance = balance
        self.kind = kind
    }
}

/// A `ledger_entries` row to insert: one side of a transfer.
package struct EntryRow: Sendable, Hashable, ChainedFields {
    package var id: String
    package var transferID: String
    package var walletID: String
    package var direction: EntryDirection
    package var amount: Cents
    package var type: String
    package var refType: String
    package var refID: String
    /// When it is written: the transaction's ``LedgerTransaction/now``.
    package var createdAt: Int64
    /// Its chain hash (``LedgerChain``).
    package var hash: String
}

/// A `refunds` row: money a payee returned to the payer of a paid session, under the payee's idempotency key.
package struct RefundRow: Sendable, Hashable {
    /// The refund's id (a UUID).
    package var id: String
    /// The paid session refunded.
    package var sessionID: String
    /// The amount returned to the payer, in cents, positive.
    package var amount: Cents
    /// The user the refund was made as (the session's payee, through its token or one of its keys).
    package var requestedBy: String
    /// The `Idempotency-Key` of the request, unique per requester: a retry gets this refund again.
    package var idempotencyKey: String
    /// The transfer that moved the money back.
    package var transferID: String
    /// The id of its signed receipt; `nil` where the ledger signs none.
    package var receiptID: String?
    /// The receipt's JSON (``StoredReceipt/body``), read with the row; not a column of `refunds`.
    package var receiptBody: String?
    /// The session's refunded total once this refund was made.
    package var refundedTotal: Cents
    /// Milliseconds since 1970 on the store's clock.
    package var createdAt: Int64
    /// The payment of a split session it returned (part of); `nil` for a session of one share.
    package var paymentID: String?

    /// A row as read from the database, or about to be inserted.
    package init(
        id: String,
        sessionID: String,
        amount: Cents,
        requestedBy: String,
        idempotencyKey: String,
        transferID: String,
        receiptID: String?,
        receiptBody: String? = nil,
        refundedTotal: Cents,
        createdAt: Int64,
        paymentID: String? = nil
    ) {
        self.paymentID = paymentID
        self.id = id
        self.sessionID = sessionID
        self.amount = amount
        self.requestedBy = requestedBy
        self.idempotencyKey = idempotencyKey
        self.transferID = transferID
        self.receiptID = receiptID
        self.receiptBody = receiptBody
        self.refundedTotal = refundedTotal
        self.createdAt = createdAt
    }
}

/// A change of a session's stored state.
package enum SessionChange: Sendable, Hashable {
    /// Locked by `payerID` until `until`.
    case lock(payerID: String, until: Int64)
    /// The lock released at ``LedgerTransaction/now``; the holder stays in `locked_by`, so a retried unlock is still
    /// told apart from a stranger's.
    case unlock
    /// Paid by `payerID` at ``LedgerTransaction/now``, with `tip` on top (a session of one share).
    case paid(payerID: String, tip: Cents)
    /// `count` more shares of a split paid by `payerID` at ``LedgerTransaction/now``, for `amount` and `tip` on
    /// top; paid whole when `complete` (they were its last).
    case sharesPaid(count: Int, amount: Cents, tip: Cents, payerID: String, complete: Bool)
    /// Cancelled by the payee at ``LedgerTransaction/now``.
    case cancelled
    /// Every payment of a cancelled or expired split returned, as of ``LedgerTransaction/now``.
    case refundsSwept
    /// Its expiry noted (its `session.expired` event written), as of ``LedgerTransaction/now``.
    case expiryNoted
}
