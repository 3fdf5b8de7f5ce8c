import Foundation
package import GotchuCore

// The web checkout's browser sessions and its view of a session, written once over the backend primitives.
extension LedgerEngine {
    /// The user is read in the same transaction as the session is written, so a session is never started for a user
    /// disabled before it.
    package func startBrowserSession(userID: String, lifetime: Duration) async throws -> BrowserSession {
        let token = BrowserSessions.make()
        let lifetime = LedgerTime.milliseconds(lifetime)
        let expiresAt = try await measuredTransaction { transaction in
            guard let user = try await transaction.user(id: userID) else { throw Self.unknownUser }
            guard !user.disabled else { throw Self.accountDisabled }
            let row = BrowserSessionRow(
                digest: BrowserSessions.digest(token),
                userID: userID,
                createdAt: transaction.now,
                expiresAt: transaction.now + lifetime
            )
            try await transaction.insert(browserSession: row)
            return row.expiresAt
        }
        return BrowserSession(token: token, userID: userID, expiresAt: LedgerTime.date(expiresAt))
    }

    /// One read outside a transaction, the session and its user together; judged by the store's time of that read.
    package func browserSessionUser(token: String) async throws -> LedgerUser? {
        guard BrowserSessions.isWellFormed(token),
            let (session, user, now) = try await backend.browserSession(digest: BrowserSessions.digest(token))
        else { return nil }
        guard now < session.expiresAt, !user.disabled else { return nil }
        // Revoked with the user's access tokens: a session started before the revocation ends with it.
        if let notBefore = user.tokensNotBefore, session.createdAt < notBefore { return nil }
        return user
    }

    /// One delete by digest.
    package func endBrowserSession(token: String) async throws {
        guard BrowserSessions.isWellFormed(token) else { return }
        try await measuredTransaction { transaction in
            try await transaction.deleteBrowserSession(digest: BrowserSessions.digest(token))
        }
    }

    /// Deletes those whose end has come by the store's time, in one transaction.
    package func pruneBrowserSessions() async throws -> Int {
        try await measuredTransaction { transaction in
            try await transaction.deleteBrowserSessions(endedBy: transaction.now)
        }
    }

    /// One read outside a transaction, by the EID's row, retired or not: a page keeps following the session its
    /// payer saw across the payee's rotations.
    package func checkoutStatus(eid: EID) async throws -> CheckoutStatus {
        guard let found = try await backend.session(eid: eid) else {
            throw LedgerError(.sessionNotFound, detail: "no session advertises EID \(eid)")
        }
        let session = found.session
        return CheckoutStatus(
            sid: session.id,
            status: session.status(now: found.readAt),
            shares: session.shares,
            sharesPaid: session.sharesPaid,
            expiresAt: LedgerTime.date(session.expiresAt),
            eidRetired: found.retiredAt != nil,
            now: LedgerTime.date(found.readAt)
        )
    }

    /// One read of the session's EIDs outside a transaction: the newest is the one on the air (a rotation retires
    /// all the others).
    package func currentEID(sid: String) async throws -> EID {
        let eids = try await backend.eids(sessionID: sid)
        guard let newest = eids.last(where: { $0.retiredAt == nil }) ?? eids.last, let eid = EID(rawValue: newest.eid)
        else {
            throw LedgerError(.sessionNotFound, detail: "no session \(sid)")
        }
        return eid
    }
}
