public import Foundation
import GotchuAPI
public import GotchuCore
public import GotchuReceipts

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which receipt keys a client trusts, and the check of a receipt against them: what a payer or a terminal does
/// before it believes that a payment was made.
public struct ReceiptTrust: Sendable {
    /// Where the trusted keys come from.
    public enum Source: Sendable, Hashable {
        /// A key set the user or the operator supplied (a file); never changed by what a server says.
        case fixed(ReceiptKeySet)
        /// Keys pinned in `file` at first contact with the server (trust on first use). A receipt signed by a key
        /// not yet pinned is accepted only if the server still publishes every pinned key (a rotation keeps the old
        /// keys published); the new keys are then pinned too.
        case pinned(file: URL)
    }

    /// Where the keys come from.
    public let source: Source

    /// Trust in `source`.
    public init(_ source: Source) { self.source = source }

    /// Trust in the key set in `file` (JWKS, as `GET /.well-known/gotchu-receipt-keys` answers).
    public static func keyFile(_ file: URL) throws(ReceiptError) -> ReceiptTrust {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw ReceiptError("cannot read the receipt key file \(file.path): \(error.localizedDescription)")
        }
        return ReceiptTrust(.fixed(try ReceiptKeySet.decode(data)))
    }

    /// Checks that `receipt` is signed by a trusted key and is about this session, amount and kind; `ledger` is
    /// asked for its keys only when pinning needs them. Of a payment with a tip, `amountCents` is what was paid
    /// without it, and `tipCents` (when given) the tip the receipt must carry (0: none, or a receipt without one);
    /// `shareNumbers` (when given) the shares of a split session it must say were paid.
    public func verify(
        _ receipt: Receipt?,
        sessionID: String,
        amountCents: Cents,
        tipCents: Cents? = nil,
        shareNumbers: [Int]? = nil,
        kind: ReceiptKind = .payment,
        ledger: LedgerClient
    ) async throws(ReceiptError) {
        guard let receipt else { throw ReceiptError("the ledger's answer carries no receipt") }
        try receipt.requireMatches(sessionID: sessionID, amountCents: amountCents, kind: kind)
        if let tipCents, (receipt.tipCents ?? 0) != tipCents {
            throw ReceiptError("the receipt is for a tip of \(receipt.tipCents ?? 0) cents, not \(tipCents)")
        }
        if let shareNumbers, let paid = receipt.shareNumbers, paid.sorted() != shareNumbers.sorted() {
            throw ReceiptError(
                "the receipt is for shares \(paid.map(String.init).joined(separator: ", ")), not "
                    + shareNumbers.map(String.init).joined(separator: ", ")
            )
        }
        try receipt.verify(against: try await keys(for: receipt.keyID, ledger: ledger))
    }

    /// The trusted keys, including `keyID` if the pinning rules let it in.
    public func keys(for keyID: String, ledger: LedgerClient) async throws(ReceiptError) -> ReceiptKeySet {
        switch source {
        case .fixed(let keys):
            return keys
        case .pinned(let file):
            let pinned = try Self.read(file)
            if let pinned, pinned.keys.contains(where: { $0.keyID == keyID }) { return pinned }
            let published: ReceiptKeySet
            do {
                published = try await ledger.receiptKeys()
            } catch {
                throw ReceiptError("cannot fetch the ledger's receipt keys: \(error)")
            }
            if let pinned {
                let still = Set(published.keys)
                guard pinned.keys.allSatisfy(still.contains) else {
                    throw ReceiptError(
                        "the ledger no longer publishes the receipt keys pinned for it in \(file.path); if its "
                            + "operator replaced them, remove that file to pin the new ones"
                    )
                }
            }
            try Self.write(published, to: file)
            return published
        }
    }

    private static func read(_ file: URL) throws(ReceiptError) -> ReceiptKeySet? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw ReceiptError("cannot read the pinned receipt keys \(file.path): \(error.localizedDescription)")
        }
        return try ReceiptKeySet.decode(data)
    }

    private static func write(_ keys: ReceiptKeySet, to file: URL) throws(ReceiptError) {
        let data: Data
        do {
            data = try APIJSON.encoder().encode(keys)
        } catch {
            throw ReceiptError("cannot encode the receipt keys: \(error.localizedDescription)")
        }
        do {
            try PrivateFile.write(data, to: file)
        } catch {
            throw ReceiptError("cannot pin the receipt keys: \(error.description)")
        }
    }
}
