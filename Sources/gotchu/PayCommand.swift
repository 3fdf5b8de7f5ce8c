import ArgumentParser
import Foundation
import GotchuCore
import GotchuPeer

struct PayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pay",
        abstract: "Pay the nearest terminal: scan, pick it, confirm payee and amount, lock and pay.",
        discussion: """
            Log in first with `gotchu login`. The payee's name and the amount shown come from the \
            ledger, never from the air. When no terminal is clearly nearest (or with --choose), the \
            terminals heard are listed and you pick one by number.

            Every payment is written to a journal (under $XDG_STATE_HOME/gotchu, mode 0600) with its \
            idempotency key before it is sent. If a previous run was interrupted, `gotchu pay` first \
            finishes those payments with their own keys, so each ends exactly once, and stops there.

            When the radio cannot tell how near terminals are (some controllers report no signal \
            strength), --choose lists every terminal heard, marked so; check the EID on the terminal's \
            screen. Or type that EID with --eid: no scan at all. Either way, the question ends with the \
            code the terminal shows beside its EID: pay only if they match.
            "paid" is printed only once the ledger's signed receipt verifies against its receipt keys: \
            those pinned for the server at first contact (beside the login token), or those in \
            --receipt-keys FILE.

            Ctrl-C before the payment is sent stops it (a lock taken is released). Once the payment is \
            on its way it cannot be called back: its outcome is settled with the ledger and reported.

            A split session (gotchu receive --split) is paid a share at a time: the question says \
            which part of the whole you pay and how many shares are paid already, such as \
            Pay your share $10.00 of $40.00 to "bob" (2 of 4 paid)? --shares K takes K shares \
            at once (paying for friends too); the ledger refuses more than are free, and more than one of \
            a session that is not split. Paying again after paying takes the next free share. The \
            payment's id is printed once paid: the payee names it to refund you (gotchu refund \
            --payment ID).

            --tip adds a tip for the payee on top of what you pay, on any session: an amount \
            (--tip 2.00) or a percentage of what you pay (--tip 15%, rounded to the nearest cent, half a \
            cent up: 15% of $10.01 is $1.50). It is shown in the question (+ tip $1.50), counts toward \
            --max-amount, and is at most the amount it goes with. A split session cancelled or expired \
            before every share is paid refunds your share and your tip.

            Exit status: 0 paid, 1 not paid (refused, declined, nothing near…), 130 cancelled with \
            nothing paid, 4 still pending (no answer from the ledger; run `gotchu pay` again).

            Examples:
              gotchu pay                          # scan through BlueZ, confirm, pay
              gotchu pay --radio sim --yes --max-amount 20.00
              gotchu pay --eid "a1b2 c3d4 e5"     # the EID on the terminal's screen
              gotchu pay --tip 15%                # 15% of what you pay, on top
              gotchu pay --tip 2.00 --max-amount 15.00
              gotchu pay --shares 2               # your share of a split, and a friend's
            """
    )

    @Option(help: ArgumentHelp("Ignore terminals weaker than this RSSI (dBm), such as -60.", valueName: "dBm"))
    var rssiThreshold: Int16?

    @Option(help: ArgumentHelp("Refuse sessions above this amount without asking, such as 20.00.", valueName: "amount"))
    var maxAmount: String?

    @Flag(help: "Do not ask for confirmation (still bounded by --max-amount).")
    var yes = false

    @Flag(
        help:
            "Always list the terminals heard, those whose distance the radio cannot measure included, and let me choose."
    )
    var choose = false

    @Option(
        help: ArgumentHelp(
            "Pay the terminal showing this EID (such as a1b2c3d4e5 or \"a1b2 c3d4 e5\"), without scanning.",
            valueName: "eid"
        )
    )
    var eid: String?

    /// `--eid` checked: 10 hex digits, spaces and hyphens allowed.
    var typedEID: EID? {
        get throws {
            guard let eid else { return nil }
            guard let parsed = EID(typed: eid) else {
                throw ValidationError(
                    "--eid must be the 10 hex digits the terminal shows, such as a1b2c3d4e5 or \"a1b2 c3d4 e5\"; got "
                        + DisplayText.quoted(String(eid.prefix(64)))
                )
            }
            return parsed
        }
    }

    @Option(help: ArgumentHelp("Give up after this many seconds with no terminal near.", valueName: "seconds"))
    var timeout = 15

    @Option(
        help: ArgumentHelp(
            "Of a split session, pay this many shares (1 to 50): yours and your friends', such as --shares 2.",
            valueName: "count"
        )
    )
    var shares = 1

    @Option(
        help: ArgumentHelp(
            "Add a tip for the payee: an amount such as 2.00, or a percentage of what you pay such as 15% "
                + "(rounded to the cent, half up).",
            valueName: "amount|percent%"
        )
    )
    var tip: String?

    /// `--tip` parsed; `nil` without one (or with a tip of 0).
    var parsedTip: Tip? {
        get throws {
            guard let tip else { return nil }
            do {
                let parsed = try Tip.parse(tip)
                return parsed.isZero ? nil : parsed
            } catch {
                throw ValidationError("--tip: \(error); such as --tip 2.00 or --tip 15%")
            }
        }
    }

    @Option(
        help: ArgumentHelp(
            "Check receipts against the keys in this file (JWKS) instead of those pinned for the server.",
            valueName: "path"
        )
    )
    var receiptKeys: String?

    @OptionGroup var radio: RadioOptions
    @OptionGroup var server: ServerOptions

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
        guard (1...50).contains(shares) else {
            throw ValidationError("--shares must be a number of shares from 1 to 50, such as --shares 2")
        }
        _ = try parsedTip
        _ = try typedEID
        if eid != nil, choose { throw ValidationError("--eid pays one terminal; it does not go with --choose") }
        if let rssiThreshold, !(-127...20).contains(rssiThreshold) {
            throw ValidationError("--rssi-threshold must be between -127 and 20 dBm")
        }
    }

    func run() async throws {
        let output = Console()
        let ledger = try server.client()
        let journal = try PaymentJournal(path: Paths.stateHome.appendingPathComponent("journal.sqlite").path)
        let receiptTrust = try server.receiptTrust(keysFile: receiptKeys)
        let resumed = try await PaymentResumer(ledger: ledger, journal: journal, receiptTrust: receiptTrust)
            .resumeAll()
        if !resumed.isEmpty {
            for result in resumed { output.resumed(result) }
            if resumed.contains(where: { if case .stillPending = $0 { true } else { false } }) {
                throw ExitCode(Self.pendingStatus)
            }
            if resumed.contains(where: { if case .failed = $0 { true } else { false } }) { throw ExitCode.failure }
            return
        }
        var flow = PaySelection.configuration(timeout: timeout, rssiThreshold: rssiThreshold)
        flow.alwaysChoose = choose
        flow.eid = try typedEID
        flow.preApproved = yes
        flow.maximumAmountCents = try maxAmount.map { try CLIAmount.parse($0, option: "--max-amount") }
        flow.shares = shares
        flow.tip = try parsedTip
        let options = Payer.Options(
            filter: ScanFilter(serviceUUID: try radio.serviceUUID, minimumRSSI: rssiThreshold),
            flow: flow
        )
        // A typed EID needs no radio: the flow only keeps time.
        let radio: any Radio = flow.eid == nil ? try await self.radio.makeRadio(role: .payer) : NoRadio()
        let outcome = try await withTaskCancellationOnSignals {
            try await Payer(
                radio: radio,
                ledger: ledger,
                journal: journal,
                receiptTrust: receiptTrust
            )
            .run(options, interaction: TerminalInteraction(console: output))
        }
        switch outcome {
        case .paid(let offer, let balance):
            output.line(
                "paid \(Console.paying(offer)) to \(offer.payeeDescription); "
                    + (offer.paymentID.map { "payment \(DisplayText.escaped($0)); " } ?? "")
                    + "new balance \(Money.format(balance))"
            )
        case .failed(let failure):
            switch failure {
            case .cancelled, .cancelledWhileSending:
                output.line(Console.describe(failure))
                throw ExitCode(130)
            case .outcomeUnknown:
                output.line(Console.describe(failure))
                throw ExitCode(Self.pendingStatus)
            default:
                throw CLIError(Console.describe(failure))
            }
        }
    }

    /// The exit status of a payment whose outcome the ledger has not given yet.
    static let pendingStatus: Int32 = 4
}

/// How `gotchu pay` selects the terminal, shared with `gotchu simulate --trace` so a replay runs exactly the same rule.
enum PaySelection {
    /// The payer's flow for a scan of `timeout` seconds; `rssiThreshold` also filters the scan (see `accepts`).
    static func configuration(timeout: Int = 15, rssiThreshold: Int16? = nil) -> PayerStateMachine.Configuration {
        var flow = PayerStateMachine.Configuration()
        flow.scanTimeout = .seconds(timeout)
        if let rssiThreshold { flow.selector.minimumRSSI = Double(rssiThreshold) }
        return flow
    }

    /// Whether the scan filter of `gotchu pay --rssi-threshold` lets `sighting` through: like the radios, it drops
    /// sightings without RSSI once a threshold is set.
    static func accepts(_ sighting: Sighting, rssiThreshold: Int16?) -> Bool {
        guard let rssiThreshold else { return true }
        return sighting.rssi.map { $0 >= rssiThreshold } ?? false
    }
}
