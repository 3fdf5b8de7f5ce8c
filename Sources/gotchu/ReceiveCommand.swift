import ArgumentParser
import Foundation
import GotchuBlueZ
import GotchuCore
import GotchuLedgerClient
import GotchuPeer
import Synchronization

struct ReceiveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receive",
        abstract: "Ask for a payment: create a session and advertise its EID until it is paid.",
        discussion: """
            Log in first with `gotchu login`. The session expires after the server's session lifetime \
            (5 minutes by default); --recreate starts a new one each time until paid. Ctrl-C cancels \
            the session and reports what the ledger says: paid if it was paid first (exit 0), \
            cancelled (exit 130), or, when the ledger cannot confirm the cancel, that the session may \
            still be paid until it expires (exit 4).

            While it waits, the session gets a new EID every --rotate-every seconds (60 by default; \
            off keeps one EID): the EID on the air changes, so nothing heard links the two, and the \
            one it replaces still resolves for the server's grace (10 s by default). The EID and the \
            confirmation code are printed for payers whose phone cannot range (gotchu pay --eid).

            When the ledger has a public URL (gotchu server --public-url), the session comes with its web \
            checkout, PUBLIC_URL/p/LINK, the same for the whole session, which any phone's browser pays: it \
            is printed as "pay on a phone: URL", and with --qr also drawn as a QR code a phone's camera \
            opens (in \
            half blocks, light modules drawn, so it reads on a dark terminal; on a terminal, white on \
            black whatever its theme, unless NO_COLOR is set).

            Through BlueZ the EID goes out as a non-connectable broadcast, from a private address \
            that bluetoothd makes anew with every EID: nothing on the air ties two EIDs, or your \
            payments, to this machine. --advertise-as peripheral sends every EID from the adapter's \
            own public address instead, which anyone listening can follow from place to place: keep \
            it for a fixed terminal whose whereabouts are no secret. A warning says so when it is set; \
            gotchu doctor shows which address would be used.

            --split N shares the amount among N payers (a group's bill): N equal shares, the cents \
            that do not divide evenly going to the first shares ($10.01 in 4 is $2.51, $2.50, $2.50, \
            $2.50). Each payer pays one share (or more, with gotchu pay --shares) from their own phone; \
            the EID stays on the air and "2 of 4 paid" is printed as shares land, until every share is \
            paid. Cancelled (Ctrl-C) or expired before then, the ledger refunds every payer at once, tips \
            included, and the receiver says so: "cancelled: refunded $20.00 to 2 payers". A payer's \
            tip (gotchu pay --tip) comes on top of its share and is counted apart.

            --ask-tip 10,15,20 suggests tips to payers, in whole percent of what each pays (its share \
            of a split): the web checkout shows a button for each, and gotchu pay prints them. A \
            suggestion only: a payer may tip something else, or nothing.

            "paid" is printed only once every payment's signed receipt verifies against the ledger's \
            receipt keys: those pinned for the server at first contact, or those in --receipt-keys FILE.

            Exit status: 0 paid, 2 expired unpaid, 130 cancelled, 4 cancel not confirmed by the ledger, \
            1 any other failure (a receipt that does not verify included).

            Examples:
              gotchu receive --amount 12.50                # advertise through BlueZ
              gotchu receive --amount 12.50 --radio sim    # the simulated air of this machine
              gotchu receive --amount 40 --split 4         # four payers, $10.00 each
              gotchu receive --amount 40 --ask-tip 10,15,20  # suggest tips to payers
              gotchu receive --amount 12.50 --reference "order 1017"  # shown to the payer
              gotchu receive --amount 12.50 --rotate-every off
              gotchu receive --amount 12.50 --qr           # and a QR code of the web checkout
              gotchu receive --amount 12.50 --radio none   # no Bluetooth: the QR code only
              gotchu receive --amount 12.50 --advertise-as peripheral  # fixed terminal
            """
    )

    @Option(help: ArgumentHelp("Amount to ask, in dollars and cents, such as 12.50.", valueName: "amount"))
    var amount: String

    @Option(
        help: ArgumentHelp(
            "Split the amount into this many equal shares, one for each payer (2 to 50), such as --split 4 for a "
                + "table of four; 1 is one payer.",
            valueName: "payers"
        )
    )
    var split = 1

    @Option(
        help: ArgumentHelp(
            "Suggest these tips to payers, in whole percent of what each pays, such as --ask-tip 10,15,20 (at most "
                + "5, each 1 to 100): the web checkout shows a button for each and gotchu pay prints them.",
            valueName: "percents"
        )
    )
    var askTip: String?

    /// `--ask-tip` as the terminal's suggestion; none when not given.
    var tipPrompt: TipPrompt {
        get throws {
            do {
                return try TipPrompt.parse(askTip ?? "")
            } catch {
                throw ValidationError("--ask-tip: \(error)")
            }
        }
    }

    @Option(
        help: ArgumentHelp(
            "Your own reference for the charge, such as an order number (at most 128 characters): shown to the payer "
                + "and kept with the payment in your wallet's history, its webhook events and the receipt page.",
            valueName: "text"
        )
    )
    var reference: String?

    @Flag(help: "When the session expires unpaid, create a new one (at most 12).")
    var recreate = false

    @Flag(
        help: ArgumentHelp(
            "Draw the web checkout of each EID as a QR code that a phone's camera opens (needs a ledger with a "
                + "public URL)."
        )
    )
    var qr = false

    @Option(
        help: ArgumentHelp(
            "Check receipts against the keys in this file (JWKS) instead of those pinned for the server.",
            valueName: "path"
        )
    )
    var receiptKeys: String?

    @Option(
        help: ArgumentHelp(
            "Give the session a new EID this often, in seconds (5 or more), or off (default 60).",
            valueName: "seconds|off"
        )
    )
    var rotateEvery = "60"

    /// `--rotate-every` as a duration; `nil` for off.
    var rotation: Duration? {
        get throws {
            let text = rotateEvery.trimmingCharacters(in: .whitespaces).lowercased()
            if text == "off" { return nil }
            guard let seconds = Int(text), (5...86_400).contains(seconds) else {
                throw ValidationError("--rotate-every must be off or a whole number of seconds from 5 to 86400")
            }
            return .seconds(seconds)
        }
    }

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Advertise this terminal's calibration: the RSSI a phone measured 1 m away (`gotchu kiosk calibrate`), "
                + "from -100 to -20.",
            valueName: "dBm"
        )
    )
    var calibratedRSSI: Int16?

    @Option(
        help: ArgumentHelp(
            "BlueZ: broadcast (default; non-connectable, from a new private address with every EID, so no one can "
                + "follow you by it) or peripheral (from the adapter's public address, the same for every EID: "
                + "only for a fixed terminal).",
            valueName: "broadcast|peripheral"
        )
    )
    var advertiseAs: BlueZAdvertisingType = .broadcast

    func validate() throws {
        _ = try rotation
        _ = try tipPrompt
        guard (1...50).contains(split) else {
            throw ValidationError("--split must be a number of payers from 1 to 50, such as --split 4")
        }
        let cents = try CLIAmount.parse(amount, option: "--amount")
        guard cents >= Cents(split) else {
            throw ValidationError(
                "--split \(split) needs at least $0.01 a share: \(Money.format(cents)) cannot be split \(split) ways"
            )
        }
        if let calibratedRSSI, !Calibration.plausibleCalibratedRSSI.contains(calibratedRSSI) {
            throw ValidationError("--calibrated-rssi must be from -100 to -20 dBm")
        }
        if let reference, let problem = OrderReference.problem(in: reference) {
            throw ValidationError("--reference \(problem)")
        }
    }

    @OptionGroup var radio: RadioOptions
    @OptionGroup var server: ServerOptions

    func run() async throws {
        let cents = try CLIAmount.parse(amount, option: "--amount")
        let ledger = try server.client()
        let radio = try await self.radio.makeRadio(role: .receiver, advertisingType: advertiseAs)
        let output = Console()
        if let bluez = radio as? BlueZRadio, let finding = try? await bluez.addressPrivacy(),
            finding.severity != .ok
        {
            output.warning(finding.text)
        }
        var configured = Receiver.Options(amountCents: cents, serviceUUID: try self.radio.serviceUUID)
        configured.flow = .init(recreateOnExpiry: recreate, maximumSessions: recreate ? 12 : 1)
        configured.rotateEvery = try rotation
        configured.calibratedRSSI = calibratedRSSI
        configured.shares = split > 1 ? split : nil
        configured.tipPrompt = try tipPrompt
        configured.reference = reference
        let options = configured
        let receiptTrust = try server.receiptTrust(keysFile: receiptKeys)
        // Off the air, the QR code is the only way to the payment: it is drawn without --qr.
        let offAir = self.radio.radio == .none
        let qr = self.qr || offAir
        // Whether the ledger gave the EID on the air a web checkout (and whether --qr said it did not, once).
        let checkout = Mutex((current: false, warned: false, drawn: String?.none))
        let outcome = try await withTaskCancellationOnSignals {
            await Receiver(radio: radio, ledger: ledger, receiptTrust: receiptTrust).run(options) { progress in
                output.receiver(progress)
                guard qr else { return }
                switch progress {
                case .created, .rotated: checkout.withLock { $0.current = false }
                case .checkout(let url):
                    // A session's checkout link outlives its EIDs: drawn again only when it is another.
                    let draw = checkout.withLock { state in
                        defer { (state.current, state.drawn) = (true, url) }
                        return state.drawn != url
                    }
                    if draw { output.qrCode(url) }
                case .advertising:
                    let warn = checkout.withLock { state in
                        defer { state.warned = true }
                        return !state.current && !state.warned
                    }
                    if warn {
                        output.warning(
                            (offAir
                                ? "nobody can pay this session: with --radio none payers pay on the web checkout "
                                    + "only, and " : "no QR code: ")
                                + "the ledger has no public URL for its web checkout (its operator sets "
                                + "gotchu server --public-url)"
                        )
                    }
                default: break
                }
            }
        }
        switch outcome {
        case .paid(let session):
            let shares = session.shares > 1 ? " in \(session.shares) shares" : ""
            let tips = session.payments.tipCents > 0 ? " + \(Money.format(session.payments.tipCents)) in tips" : ""
            output.line("paid: \(Money.format(cents)) received\(shares)\(tips) (session \(session.sessionID))")
        case .paidUnverified(let session, let reason):
            throw CLIError(
                "session \(session.sessionID) is not taken as paid: \(reason); check the receipt keys "
                    + "(--receipt-keys) or ask the ledger's operator"
            )
        case .expired(let session):
            guard session.payments.anyPaid else {
                output.line("expired unpaid")
                throw ExitCode(2)
            }
            output.line("expired before every share was paid: " + Console.refunds(session.payments))
            throw ExitCode(2)
        case .cancelled:
            output.line("cancelled")
            throw ExitCode(130)
        case .cancelledWithRefunds(let session):
            output.line("cancelled: " + Console.refunds(session.payments))
            throw ExitCode(130)
        case .cancelUnconfirmed(let session, let reason):
            // The session's expiry is held on the radio's clock; bring it back to the wall clock to show it.
            let remaining = session.expiresAt - (await radio.now())
            let expiresAt = Date(timeIntervalSinceNow: Double(remaining.components.seconds))
            output.line(
                "could not confirm the cancel (\(reason)); the session may still be paid until it expires at "
                    + expiresAt.formatted(.iso8601)
            )
            throw ExitCode(4)
        case .createFailed(let reason):
            throw CLIError("could not create a session: \(reason)")
        case .advertisingFailed(let reason):
            throw CLIError("could not advertise: \(reason)")
        }
    }
}
