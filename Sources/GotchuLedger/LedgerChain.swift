import Crypto
import Foundation
public import GotchuCore
import GotchuReceipts

/// The ledger's hash chain: every entry stores SHA-256 over the previous entry's hash and its own canonical bytes,
/// so editing, inserting or deleting a row breaks the chain from that row on.
///
/// An entry's canonical bytes are, as ``CanonicalField``s (4-byte big-endian length, then UTF-8): the format
/// `gotchu-entry-v1`, the previous entry's hash (32 raw bytes; 32 zero bytes before the first entry), then id,
/// transfer id, wallet id, direction, amount in cents, type, ref type, ref id and the time in milliseconds (decimal).
/// The hash is stored as 64 lowercase hex digits. The head (the newest hash and the number of entries) is kept in
/// one row that every transfer locks before it reads it, so concurrent transfers chain one after another.
public enum LedgerChain {
    /// The format name, the first field of an entry's canonical bytes.
    public static let format = "gotchu-entry-v1"

    /// The hash before the first entry: 32 zero bytes, in hex.
    public static let genesis = String(repeating: "0", count: 64)

    /// The hash of an entry chained after `previous`.
    public static func hash(previous: String, entry: some ChainedFields) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(320)
        CanonicalField.append(format, to: &bytes)
        CanonicalField.append(hexBytes(previous), to: &bytes)
        for field in [
            entry.id, entry.transferID, entry.walletID, entry.direction.rawValue, String(entry.amount), entry.type,
            entry.refType, entry.refID, String(entry.createdAt),
        ] {
            CanonicalField.append(field, to: &bytes)
        }
        return SHA256.hash(data: bytes).map { hexDigits[Int($0)] }.joined()
    }

    /// The raw bytes of a hex hash; a malformed one (only possible in an edited row) yields bytes that match no
    /// real hash, so the row after it fails the check.
    static func hexBytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return Array(hex.utf8) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        var index = 0
        while index < 64 {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return Array(hex.utf8) }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case 0x30...0x39: digit - 0x30
        case 0x61...0x66: digit - 0x61 + 10
        default: nil
        }
    }

    private static let hexDigits = (0..<256).map { String(format: "%02x", $0) }
}

/// The fields of an entry the chain covers.
public protocol ChainedFields {
    /// The entry's id (a UUID).
    var id: String { get }
    /// The transfer the entry is one side of: its DEBIT and its CREDIT share it.
    var transferID: String { get }
    /// The wallet the entry debits or credits.
    var walletID: String { get }
    /// Whether it takes money from the wallet or gives it.
    var direction: EntryDirection { get }
    /// The amount moved, in cents, positive.
    var amount: Cents { get }
    /// What moved the money (`SEND_P2P`, `REFUND_IN`, `DEPOSIT`, …), as the wallet's history shows it.
    var type: String { get }
    /// The kind of row the transfer belongs to: `session`, `deposit`, `payout` or `funding`.
    var refType: String { get }
    /// The id of that row.
    var refID: String { get }
    /// When it was written: milliseconds since 1970 on the store's clock.
    var createdAt: Int64 { get }
}

/// The head of the chain: the newest entry's hash and how many entries are chained.
public struct ChainHead: Sendable, Hashable {
    /// The newest entry's hash (``LedgerChain/genesis`` before the first).
    public var hash: String
    /// How many entries the chain holds.
    public var count: Int64

    /// A head as read from the database.
    public init(hash: String, count: Int64) {
        self.hash = hash
        self.count = count
    }
}

/// An entry as stored, for the audit: every column, with its chain hash (`nil` if it was never chained).
public struct StoredEntry: Sendable, Hashable, ChainedFields {
    /// The entry's position in the ledger (`ledger_entries.seq`), increasing with each insert: the chain's order.
    public var seq: Int64
    public var id: String
    public var transferID: String
    public var walletID: String
    public var direction: EntryDirection
    public var amount: Cents
    public var type: String
    public var refType: String
    public var refID: String
    public var createdAt: Int64
    /// The entry's chain hash (lowercase hex), over the previous entry's and this one's fields; `nil` for an entry
    /// written before the chain existed and not chained yet.
    public var hash: String?

    /// A row as read from the database; `direction` is refused if no version writes it.
    public init(
        seq: Int64,
        id: String,
        transferID: String,
        walletID: String,
        direction: String,
        amount: Cents,
        type: String,
        refType: String,
        refID: String,
        createdAt: Int64,
        hash: String?
    ) throws(LedgerError) {
        guard let direction = EntryDirection(rawValue: direction) else {
            throw LedgerError(.inconsistent, detail: "entry seq \(seq) has the unknown direction \(direction)")
        }
        self.seq = seq
        self.id = id
        self.transferID = transferID
        self.walletID = walletID
        self.direction = direction
        self.amount = amount
        self.type = type
        self.refType = refType
        self.refID = refID
        self.createdAt = createdAt
        self.hash = hash
    }
}
