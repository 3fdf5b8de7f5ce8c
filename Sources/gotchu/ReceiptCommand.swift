import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient
import GotchuReceipts

struct ReceiptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt",
        abstract: "Check a ledger's signed receipts.",
        subcommands: [ReceiptVerifyCommand.self]
    )
}

struct ReceiptVerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check one receipt's signature against a ledger's published keys or a key file.",
        discussion: """
            The receipt is the JSON object a payment's answer or a session's status carries under \
            "receipt" (that whole answer is accepted too), in any JSON spelling of its fields: saved \
            as the ledger wrote it, or again by any JSON library (spaces, indentation, keys in another \
            order). The signature covers the fields, not the text. Refused as not a receipt: a key \
            named twice, a key a receipt does not have, a number that is not an integer. Its \
            signature is checked against the keys the ledger publishes at \
            /.well-known/gotchu-receipt-keys (--server), or against a key file in the same JSON form \
            (--keys), so a third party needs no account and need not trust the answer the receipt \
            came in.

            Exit status: 0 valid; 1 invalid: the signature or the fields it covers do not check out \
            (a forgery, or a receipt changed since it was signed); 2 not a receipt: unreadable, not \
            JSON, or not a receipt's fields; 3 not checked: the ledger's keys could not be fetched or \
            the key file read. The reason is printed.

            Examples:
              gotchu receipt verify receipt.json --server https://ledger.example.com
              curl -s … | gotchu receipt verify - --keys gotchu-receipt-keys.json
            """
    )

    @Argument(help: ArgumentHelp("The receipt's JSON file, or - for standard input.", valueName: "file"))
    var file: String

    @Option(help: ArgumentHelp("A key file (JWKS) to check against instead of a server's keys.", valueName: "path"))
    var keys: String?

    @OptionGroup var server: ServerOptions

    /// Why a receipt was not found valid, each with its exit status.
    enum Outcome: Int32 {
        case invalid = 1
        case notAReceipt = 2
        case notChecked = 3
    }

    func run() async throws {
        let receipt: Receipt
        do {
            receipt = try read()
        } catch {
            throw refuse(.notAReceipt, "not a receipt: \(error.description)")
        }
        let keySet: ReceiptKeySet
        do {
            keySet = try await Self.keys(file: keys, server: server)
        } catch {
            throw refuse(.notChecked, "not checked: \(error.description)")
        }
        do {
            try receipt.verify(against: keySet)
        } catch {
            throw refuse(.invalid, "invalid: \(error.description)")
        }
        print(
            "valid: \(DisplayText.escaped(receipt.kind.rawValue)) of \(Money.format(receipt.amountCents)) "
                + "\(DisplayText.escaped(receipt.currency)), session \(DisplayText.escaped(receipt.sessionID)), "
                + "signed by \(DisplayText.escaped(receipt.keyID)) at "
                + Date(timeIntervalSince1970: Double(receipt.issuedAtMilliseconds) / 1000)
                .formatted(.iso8601)
        )
    }

    /// Prints `line` and answers the exit status of `outcome`.
    private func refuse(_ outcome: Outcome, _ line: String) -> ExitCode {
        print(Console.safe(line))
        return ExitCode(outcome.rawValue)
    }

    /// The keys to check against: the key file's, else the ledger's published ones.
    private static func keys(file: String?, server: ServerOptions) async throws(ReceiptError) -> ReceiptKeySet {
        if let file {
            guard case .fixed(let set) = try ReceiptTrust.keyFile(URL(fileURLWithPath: file)).source else {
                throw ReceiptError("cannot read the key file \(file)")
            }
            return set
        }
        do {
            return try await server.client(requireLogin: false).receiptKeys()
        } catch {
            throw ReceiptError("cannot fetch the ledger's receipt keys: \(error)")
        }
    }

    /// The receipt, alone or inside an answer that carries one under `receipt`.
    private func read() throws(ReceiptError) -> Receipt {
        let data: Data
        do {
            data =
                file == "-"
                ? FileHandle.standardInput.readDataToEndOfFile() : try Data(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw ReceiptError("cannot read \(file): \(error.localizedDescription)")
        }
        guard data.count <= Receipt.maximumJSONSize else {
            throw ReceiptError("\(file) is larger than a receipt can be")
        }
        // No key twice anywhere in the file, and any spelling of a receipt's fields within it.
        let members: [String: Range<Int>]
        do {
            members = try StrictJSON.check(data)
        } catch {
            throw ReceiptError("\(file) is not strict JSON: \(error.description)")
        }
        if members["id"] == nil, let range = members["receipt"] {
            return try Receipt(savedJSON: Array(data)[range])
        }
        guard members["id"] != nil else {
            throw ReceiptError("\(file) holds no receipt (a JSON object with id, kind, sid, …, kid and signature)")
        }
        return try Receipt(savedJSON: data)
    }
}
