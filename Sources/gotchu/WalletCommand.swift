import ArgumentParser
import Foundation
import GotchuAPI
import GotchuCore
import GotchuLedgerClient

struct WalletCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wallet",
        abstract: "Show your balance and latest ledger entries."
    )

    @OptionGroup var server: ServerOptions

    @Flag(help: "List every entry, newest first, following the server's pages to the end.")
    var all = false

    @Flag(help: "With --all: CSV with a header row (RFC 4180), for a spreadsheet.")
    var csv = false

    @Flag(help: "With --all: JSON Lines, one entry object per line, as GET /wallet/entries spells it.")
    var json = false

    func validate() throws {
        guard !(csv && json) else { throw ValidationError("choose one of --csv and --json") }
        guard all || !(csv || json) else { throw ValidationError("--csv and --json go with --all") }
    }

    func run() async throws {
        guard !all else {
            try await listAll()
            return
        }
        let wallet = try await server.client().wallet()
        print("balance \(Money.format(wallet.availableCents))   wallet \(DisplayText.escaped(wallet.walletID))")
        guard !wallet.recent.isEmpty else {
            print("no entries yet")
            return
        }
        print(EntryTable.render(wallet.recent))
    }
}

extension WalletCommand {
    /// Every entry, a page at a time: each page is written before the next is asked for, so a long history streams.
    private func listAll() async throws {
        let client = try server.client()
        var cursor: String?
        var first = true
        var any = false
        repeat {
            let page = try await client.walletEntries(limit: EntryPageSize.maximum, cursor: cursor)
            var lines: [String] = []
            if first && csv { lines.append(HistoryExport.csvHeader) }
            for entry in page.entries {
                if csv {
                    lines.append(HistoryExport.csvRow(entry))
                } else if json {
                    lines.append(try HistoryExport.jsonLine(entry))
                } else {
                    lines.append(HistoryExport.textLine(entry))
                }
            }
            if !lines.isEmpty { print(lines.joined(separator: csv ? "\r\n" : "\n"), terminator: csv ? "\r\n" : "\n") }
            any = any || !page.entries.isEmpty
            first = false
            // A server that answers the same cursor again would loop forever; it is refused instead.
            if let next = page.nextCursor, next == cursor {
                throw CLIError("the server repeated a page cursor; stopping")
            }
            cursor = page.nextCursor
        } while cursor != nil
        if !any && !csv && !json { print("no entries yet") }
    }
}

/// A wallet's history written for other programs. Every string in it came from the server and is treated as
/// hostile: unsafe characters are escaped as ``DisplayText`` escapes them, and in CSV a cell a spreadsheet would
/// run as a formula is defused.
enum HistoryExport {
    static let csvColumns = [
        "time", "direction", "amount_cents", "amount", "counterparty", "counterparty_domain", "counterparty_verified",
        "session_id", "kind", "entry_id", "reference",
    ]

    static var csvHeader: String { csvColumns.joined(separator: ",") }

    /// One CSV record (without its CRLF).
    static func csvRow(_ entry: WalletHistoryEntry) -> String {
        let signed = entry.direction == .credit ? entry.amountCents : -entry.amountCents
        // Only the cells made here (time, direction, amounts, verified) are written as they are; the rest are
        // the server's strings.
        let cells: [String] = [
            timestamp(entry.createdAt),
            entry.direction.rawValue,
            String(signed),
            Money.format(signed, currencySymbol: ""),
            foreign(entry.counterparty?.name),
            foreign(entry.counterparty?.domain),
            entry.counterparty?.verified.map { $0 ? "true" : "false" } ?? "",
            foreign(entry.sessionID),
            foreign(entry.kind),
            foreign(entry.id),
            foreign(entry.reference),
        ]
        return cells.map(quoted).joined(separator: ",")
    }

    /// A string from elsewhere as a cell: unsafe characters escaped, and a leading `=`, `+`, `-`, `@`, tab or
    /// carriage return (what a spreadsheet reads as the start of a formula) defused with a leading `'`.
    static func foreign(_ text: String?) -> String {
        guard let text, !text.isEmpty else { return "" }
        let escaped = DisplayText.escaped(text, maximumLength: 512)
        let starts: Set<Unicode.Scalar> = ["=", "+", "-", "@", "\t", "\r"]
        guard let first = text.unicodeScalars.first, starts.contains(first) else { return escaped }
        return "'" + escaped
    }

    /// A cell quoted as RFC 4180 has it: in double quotes, doubling the quotes in it, when it holds a comma, a
    /// quote, a line break, or a leading or trailing space.
    static func quoted(_ cell: String) -> String {
        let special = cell.unicodeScalars.contains { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" }
        guard special || cell.hasPrefix(" ") || cell.hasSuffix(" ") else { return cell }
        return "\"" + cell.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// One JSON Lines line: the entry as the API spells it, with every character outside printable ASCII written
    /// as a `\u` escape, which JSON reads back as the same string and no terminal acts on.
    static func jsonLine(_ entry: WalletHistoryEntry) throws -> String {
        let text = String(decoding: try APIJSON.encoder().encode(entry), as: UTF8.self)
        var line = ""
        for scalar in text.unicodeScalars {
            if (0x20..<0x7F).contains(scalar.value) {
                line.unicodeScalars.append(scalar)
            } else {
                for unit in String(scalar).utf16 { line += String(format: "\\u%04x", unit) }
            }
        }
        return line
    }

    /// One line of the text listing.
    static func textLine(_ entry: WalletHistoryEntry) -> String {
        let sign = entry.direction == .credit ? "+" : "-"
        let who =
            entry.counterparty.map { party in
                DisplayText.quoted(party.name)
                    + (party.domain.map { " (\(DisplayText.escaped($0, maximumLength: 64)))" } ?? "")
            } ?? "-"
        return [
            timestamp(entry.createdAt),
            (sign + Money.format(entry.amountCents)).padding(toLength: 14, withPad: " ", startingAt: 0),
            DisplayText.escaped(entry.kind, maximumLength: 24).padding(toLength: 14, withPad: " ", startingAt: 0),
            who + (entry.reference.map { "  for " + DisplayText.quoted($0, maximumLength: 64) } ?? ""),
        ].joined(separator: "  ")
    }

    static func timestamp(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }
}

/// Ledger entries as an aligned text table. The server's strings (type, reference) are shown escaped and bounded,
/// so a cell can neither rewrite the terminal nor push the table apart.
enum EntryTable {
    static func render(_ entries: [LedgerEntry]) -> String {
        let rows = entries.map { entry in
            [
                entry.createdAt.formatted(.iso8601.time(includingFractionalSeconds: false)),
                entry.direction.rawValue,
                (entry.direction == .credit ? "+" : "-") + Money.format(entry.amountCents),
                DisplayText.escaped(entry.type, maximumLength: 24),
                DisplayText.escaped("\(entry.refType) \(entry.refID.prefix(8))", maximumLength: 40),
            ]
        }
        let header = ["time (UTC)", "dir", "amount", "type", "reference"]
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        return ([header] + rows).map { row in
            zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
