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
            "receipt" (that whole answer is accepted too), exactly as the ledger wrote it: compact, \
            no key twice, no key a receipt does not have. Its signature is checked against the keys \
            the ledger publishes at /.well-known/gotchu-receipt-keys (--server), or against a key \
            file in the same JSON form (--keys), so a third party needs no account and need not trust \
            the answer the receipt came in.

            Exit status: 0 valid, 1 invalid (the reason is printed).

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

    func run() async throws {
        do {
            let receipt = try read()
            let keySet: ReceiptKeySet
            if let keys {
                guard case .fixed(let set) = try ReceiptTrust.keyFile(URL(fileURLWithPath: keys)).source else {
                    throw ReceiptError("unreadable key file")
                }
                keySet = set
            } else {
                let ledger = try server.client(requireLogin: false)
                do {
                    keySet = try await ledger.receiptKeys()
                } catch {
                    throw ReceiptError("cannot fetch the ledger's receipt keys: \(error)")
                }
            }
            try receipt.verify(against: keySet)
            print(
                "valid: \(DisplayText.escaped(receipt.kind.rawValue)) of \(Money.format(receipt.amountCents)) "
                    + "\(DisplayText.escaped(receipt.currency)), session \(DisplayText.escaped(receipt.sessionID)), "
                    + "signed by \(DisplayText.escaped(receipt.keyID)) at "
                    + Date(timeIntervalSince1970: Double(receipt.issuedAtMilliseconds) / 1000)
                    .formatted(.iso8601)
            )
        } catch let error as ReceiptError {
            print("invalid: \(Console.safe(error.description))")
            throw ExitCode.failure
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
        // Strictly, as the ledger wrote it: no key twice anywhere, no key a receipt lacks, the receipt's exact text.
        let members: [String: Range<Int>]
        do {
            members = try StrictJSON.check(data)
        } catch {
            throw ReceiptError("\(file) is not strict JSON: \(error.description)")
        }
        if members["id"] == nil, let range = members["receipt"] {
            return try Receipt(strictJSON: Array(data)[range])
        }
        guard members["id"] != nil else {
            throw ReceiptError("\(file) holds no receipt (a JSON object with id, kind, sid, …, kid and signature)")
        }
        return try Receipt(strictJSON: data)
    }
}
