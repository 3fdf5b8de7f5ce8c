import Foundation
import GotchuCore
import GotchuReceipts

/// Where a page of a wallet's history ends: the sequence number and id of its last (oldest) entry. The next page
/// holds the entries before it, so entries written meanwhile (all newer) never shift a page, and each entry is on
/// exactly one page.
///
/// Its token is opaque to clients: base64url of `v1 <seq> <entry id>`. The id is checked against the wallet's
/// entry at that position, so a made-up or another wallet's token is refused rather than quietly paging from
/// wherever it points.
package struct EntryCursor: Sendable, Hashable {
    /// The entry's position in the ledger (`ledger_entries.seq`).
    package var seq: Int64
    /// The entry's id.
    package var entryID: String

    /// The longest token accepted (an id of 64 characters and a 19-digit position fit well within it).
    package static let maximumTokenLength = 160

    /// A cursor at an entry.
    package init(seq: Int64, entryID: String) {
        self.seq = seq
        self.entryID = entryID
    }

    /// The cursor a client sent back. Throws ``LedgerError/Kind/invalidInput`` for a token of a length no cursor
    /// has, ``LedgerError/Kind/notFound`` for any other this server did not make: no page starts there.
    package init(token: String) throws(LedgerError) {
        guard !token.isEmpty, token.utf8.count <= Self.maximumTokenLength else {
            throw LedgerError(
                .invalidInput,
                detail: "a cursor is 1 to \(Self.maximumTokenLength) characters, as next_cursor gave it"
            )
        }
        let invalid = Self.unknown
        guard let data = Base64URL.decode(token), let text = String(data: data, encoding: .utf8) else { throw invalid }
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1", !parts[1].isEmpty, parts[1].utf8.count <= 19,
            parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seq = Int64(parts[1]), seq > 0,
            Self.isEntryID(parts[2])
        else { throw invalid }
        self.init(seq: seq, entryID: String(parts[2]))
    }

    /// A well-formed cursor that names no page of this wallet.
    static let unknown = LedgerError(.notFound, detail: "no page starts at this cursor; start again without it")

    /// The token a client sends back.
    package var token: String { Base64URL.encode(Data("v1 \(seq) \(entryID)".utf8)) }

    /// Entry ids are UUIDs; anything else in that place was not written by this server.
    static func isEntryID(_ text: Substring) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D
            }
    }
}

/// One entry of a wallet's history as the stores read it: the entry, and the wallet on the other side of its
/// transfer with that wallet's owner.
package struct HistoryEntryRow: Sendable, Hashable {
    /// The entry's position in the ledger (`ledger_entries.seq`), increasing with each insert: the
    /// order of the history and its cursor.
    package var seq: Int64
    /// The entry, its counterparty not yet set.
    package var entry: WalletEntry
    /// The other side's wallet, `nil` if the transfer has no other entry.
    package var counterpartyWalletID: String?
    /// The other side's owner, `nil` for a system account.
    package var counterpartyUser: PayeeRow?

    /// A row as read from the database.
    package init(seq: Int64, entry: WalletEntry, counterpartyWalletID: String?, counterpartyUser: PayeeRow?) {
        self.seq = seq
        self.entry = entry
        self.counterpartyWalletID = counterpartyWalletID
        self.counterpartyUser = counterpartyUser
    }

    /// The entry as the wallet's history shows it, with its counterparty.
    var shown: WalletEntry {
        var shown = entry
        if let user = counterpartyUser {
            // The rules a payer sees a payee by.
            shown.counterparty = Counterparty(user: user)
        } else if let wallet = counterpartyWalletID {
            shown.counterparty = Counterparty(systemAccount: wallet)
        }
        return shown
    }
}

/// A page of a wallet's history as a backend reads it.
package struct EntryHistoryPage: Sendable, Hashable {
    /// The entries, newest first.
    package var entries: [HistoryEntryRow]
    /// Whether the cursor asked from names an entry of this wallet (`true` when none was asked from).
    package var cursorFound: Bool

    /// A page as read from the database.
    package init(entries: [HistoryEntryRow], cursorFound: Bool) {
        self.entries = entries
        self.cursorFound = cursorFound
    }
}

extension LedgerEngine {
    /// One page of the user's entries, newest first, from `cursor` (a token of an earlier page's `next_cursor`) or
    /// from the newest.
    package func entries(userID: String, cursor: String?, limit: Int) async throws -> WalletEntriesPage {
        guard (1...EntryPageSize.maximum).contains(limit) else {
            throw LedgerError(.invalidInput, detail: "limit must be 1 to \(EntryPageSize.maximum), got \(limit)")
        }
        let position = try cursor.map { token throws(LedgerError) in try EntryCursor(token: token) }
        // One more than asked, to tell whether another page follows without a request that answers empty.
        guard let page = try await backend.entries(userID: userID, before: position, limit: limit + 1) else {
            throw Self.unknownUser
        }
        guard page.cursorFound else {
            throw EntryCursor.unknown
        }
        let shown = page.entries.prefix(limit)
        let next =
            page.entries.count > limit ? shown.last.map { EntryCursor(seq: $0.seq, entryID: $0.entry.id).token } : nil
        return WalletEntriesPage(entries: shown.map(\.shown), nextCursor: next)
    }
}
