import ArgumentParser
import Foundation
import GotchuCore
import GotchuDBus
import GotchuKiosk
import GotchuKioskClient
import Synchronization

struct ChargeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "charge",
        abstract: "Ask the kiosk on this machine for a payment, as a point-of-sale does, and follow it to its end.",
        discussion: """
            Talks to `gotchu kiosk` over D-Bus (io.gotchu.Kiosk1 on the system bus; the bus policy lets members \
            of the gotchu-pos group call it) and prints each step of the charge. Ctrl-C cancels the charge.

            The exit status says how the charge ended, also with --cancel: 0 paid, 2 expired, 3 cancelled, \
            1 failed (or the kiosk refused), 4 cancel asked but not yet confirmed by the ledger (the kiosk keeps \
            trying; --show tells the end). --refund returns money of a paid charge to its payer: 0 refunded (the \
            kiosk verified the ledger's signed receipt of the refund), 1 refused.

            With --split N the amount is split into N equal shares (2 to 50; the cents that do not divide evenly \
            go to the first shares), each paid by a payer of its own: the kiosk keeps advertising until every share \
            is paid, and prints each share as it is. A split charge cancelled or expired with shares paid has them \
            refunded by the ledger; the amount refunded is printed.

            When the ledger has a public URL (gotchu server --public-url), the web checkout of the EID on the air \
            is printed as "pay on a phone: URL", for a payer without gotchu (again when the EID changes); --qr \
            also draws it as a QR code a phone's camera opens, as gotchu receive --qr does.

            A paid split charge is refunded payment by payment: --show lists its payments (each payer's send, \
            with its shares, tip and what was refunded of it), and --refund ID --payment PAYMENT returns one \
            (--amount: part of it). --refund ID alone returns all that is left of every payment, each a refund \
            of its own.

            Examples:
              gotchu charge 12.50 --reference "order 1017"
              gotchu charge 40.00 --split 4         # four payers, $10.00 each
              gotchu charge 40.00 --ask-tip 10,15,20  # suggest these tips instead of the kiosk's
              gotchu charge 12.50 --no-wait         # print the charge id and return
              gotchu charge --show 0f4c…            # a charge's state
              gotchu charge --cancel 0f4c…
              gotchu charge --refund 0f4c… --amount 5.00   # without --amount: all that is not refunded yet
              gotchu charge --refund 0f4c… --payment 7d1e…  # one payer of a split charge
              gotchu charge 12.50 --qr              # and a QR code of the web checkout
            """
    )

    @Argument(help: ArgumentHelp("Amount to charge, in dollars and cents, such as 12.50.", valueName: "amount"))
    var amount: String?

    @Option(help: ArgumentHelp("Your own reference for the charge, such as an order number.", valueName: "text"))
    var reference = ""

    @Option(
        help: ArgumentHelp(
            "Split the amount into this many equal shares, each paid by a payer of its own (2 to 50).",
            valueName: "n"
        )
    )
    var split: Int?

    @Option(
        help: ArgumentHelp(
            "Suggest these tips to payers, in whole percent of what each pays, such as --ask-tip 10,15,20 (at most "
                + "5, each 1 to 100), instead of the kiosk's tip_percents; none suggests no tip.",
            valueName: "percents|none"
        )
    )
    var askTip: String?

    /// `--ask-tip` as the charge's tips: `nil` leaves them to the kiosk, `none` (or nothing) asks for none.
    var tipPrompt: TipPrompt? {
        get throws {
            guard let askTip else { return nil }
            if askTip.trimmingCharacters(in: .whitespaces).lowercased() == "none" { return TipPrompt.none }
            do {
                return try TipPrompt.parse(askTip)
            } catch {
                throw ValidationError("--ask-tip: \(error)")
            }
        }
    }

    @Flag(help: "Return as soon as the kiosk accepted the charge, printing its id.")
    var noWait = false

    @Option(help: ArgumentHelp("Show the charge with this id and exit.", valueName: "id"))
    var show: String?

    @Option(help: ArgumentHelp("Cancel the charge with this id and exit.", valueName: "id"))
    var cancel: String?

    @Option(help: ArgumentHelp("Refund the paid charge with this id and exit.", valueName: "id"))
    var refund: String?

    @Option(
        name: .customLong("amount"),
        help: ArgumentHelp(
            "With --refund: how much, such as 5.00 (default: all of the amount paid not refunded yet).",
            valueName: "amount"
        )
    )
    var refundAmount: String?

    @Option(
        help: ArgumentHelp(
            "With --refund: the payment of a split charge to refund (its payment_id, as --show lists them).",
            valueName: "payment-id"
        )
    )
    var payment: String?

    @Flag(
        help: ArgumentHelp(
            "Draw the web checkout of the EID on the air as a QR code that a phone's camera opens (needs a ledger "
                + "with a public URL)."
        )
    )
    var qr = false

    @Option(
        help: ArgumentHelp(
            "Bus the kiosk is on: system (default), session, or a D-Bus address such as unix:path=/tmp/bus.",
            valueName: "bus"
        )
    )
    var bus = "system"

    func validate() throws {
        let actions = [amount != nil, show != nil, cancel != nil, refund != nil].filter { $0 }.count
        guard actions == 1 else {
            throw ValidationError("give an amount, --show ID, --cancel ID or --refund ID (one of them)")
        }
        if let split {
            guard amount != nil else { throw ValidationError("--split goes with an amount") }
            guard (2...KioskError.maximumShares).contains(split) else {
                throw ValidationError("--split must be 2 to \(KioskError.maximumShares)")
            }
        }
        if let refundAmount {
            guard refund != nil else { throw ValidationError("--amount goes with --refund ID") }
            _ = try CLIAmount.parse(refundAmount, option: "--amount")
        }
        if let payment {
            guard refund != nil else { throw ValidationError("--payment goes with --refund ID") }
            guard !payment.isEmpty else { throw ValidationError("--payment needs a payment id") }
        }
        if qr, amount == nil { throw ValidationError("--qr goes with an amount") }
        if askTip != nil, amount == nil { throw ValidationError("--ask-tip goes with an amount") }
        _ = try tipPrompt
        guard DBusConnection.Bus(named: bus) != nil else {
            throw ValidationError("--bus must be \(DBusConnection.Bus.namingHint)")
        }
    }

    func run() async throws {
        let output = Console()
        let named = DBusConnection.Bus(named: bus) ?? .system
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: named)
        } catch {
            throw CLIError("cannot connect to the \(named): \(error)")
        }
        let kiosk = KioskClient(connection: connection)
        let code: Int32
        do {
            if let show {
                let charge = try await kiosk.charge(show)
                output.line(Self.describe(charge))
                for payment in Self.payments(charge) { output.line("  " + payment) }
                code = 0
            } else if let cancel {
                code = try await Self.cancel(cancel, kiosk, output)
            } else if let refund {
                let cents = try refundAmount.map { try CLIAmount.parse($0, option: "--amount") }
                code = try await Self.refund(refund, paymentID: payment, amountCents: cents, kiosk, output)
            } else {
                code = try await follow(kiosk, try CLIAmount.parse(amount ?? "", option: "amount"), output)
            }
        } catch let error as DBusError {
            await connection.close()
            throw CLIError(Self.explain(error))
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
        if code != 0 { throw ExitCode(code) }
    }

    /// Starts the charge and prints its steps until it ends; returns the exit status.
    private func follow(_ kiosk: KioskClient, _ cents: Cents, _ output: Console) async throws -> Int32 {
        // Listen before charging, so the first steps are not missed.
        let signals = try await kiosk.events()
        let shares = split ?? 1
        let id = try await kiosk.charge(
            amountCents: cents,
            reference: reference,
            shares: shares,
            tipPercents: try tipPrompt?.percents
        )
        if shares > 1 {
            let share = KioskCharge(
                id: id,
                amountCents: cents,
                shares: shares,
                reference: "",
                createdAt: .now,
                updatedAt: .now
            )
            let amounts = Set((1...shares).map(share.cents(ofShare:))).sorted(by: >).map { Money.format($0) }
            output.line(
                "charge \(id): \(Money.format(cents)) in \(shares) shares of \(amounts.joined(separator: " or "))"
            )
        } else {
            output.line("charge \(id): \(Money.format(cents))")
        }
        if noWait { return 0 }
        let checkout = CheckoutPrinter(output: output, qr: qr)
        do {
            return try await withTaskCancellationOnSignals {
                try await withThrowingTaskGroup(of: Int32.self) { group in
                    group.addTask { try await Self.printSteps(of: id, signals, kiosk, output, checkout) }
                    // Signals can be missed (the kiosk restarting between two steps): the charge's state settles it.
                    group.addTask { try await Self.pollUntilOver(id, kiosk, output, checkout) }
                    let code = try await group.next() ?? 1
                    group.cancelAll()
                    return code
                }
            }
        } catch is CancellationError {
            output.line("cancelling \(id)")
            return try await Self.cancel(id, kiosk, output)
        }
    }

    private static func printSteps(
        of id: String,
        _ signals: AsyncStream<KioskSignal>,
        _ kiosk: KioskClient,
        _ output: Console,
        _ checkout: CheckoutPrinter
    ) async throws -> Int32 {
        for await signal in signals where signal.chargeID == id {
            switch signal {
            case .advertising(_, let eid):
                output.line("waiting for a payer (EID \(eid))")
                checkout.show(try? await kiosk.charge(id))
            case .locked: output.line("a payer is paying")
            case .sharePaid(_, let paid, let shares): output.line("\(paid) of \(shares) shares paid")
            case .error(_, let reason): output.line("problem, the kiosk keeps trying: \(reason)")
            case .paymentSucceeded, .expired, .cancelled: return report(try await kiosk.charge(id), output)
            case .refunded: break
            }
        }
        try await Task.sleep(for: .seconds(3600 * 24))
        return 1
    }

    private static func pollUntilOver(
        _ id: String,
        _ kiosk: KioskClient,
        _ output: Console,
        _ checkout: CheckoutPrinter
    ) async throws -> Int32 {
        var away = false
        while true {
            try await Task.sleep(for: .seconds(2))
            do {
                let charge = try await kiosk.charge(id)
                away = false
                if let state = charge["state", as: String.self].flatMap(KioskChargeState.init(rawValue:)), state.isFinal
                {
                    return report(charge, output)
                }
                // A new EID (a rotation) comes with a checkout address of its own.
                if checkout.hasShown { checkout.show(charge) }
            } catch let error as DBusError where error.name == .serviceUnknown || error.name == .nameHasNoOwner {
                if !away { output.line("the kiosk is not on the bus; waiting for it to come back") }
                away = true
            }
        }
    }

    /// Prints how a final charge ended; returns its exit status.
    private static func report(_ charge: [String: DBusVariant], _ output: Console) -> Int32 {
        let amount = charge["amount_cents", as: Int64.self].map { Money.format($0) } ?? "?"
        let shares = Int(charge[Key.shares.rawValue, as: Int32.self] ?? 1)
        let refunded = charge[Key.refundedCents.rawValue, as: Int64.self] ?? 0
        let refunds = refunded > 0 ? "; \(Money.format(refunded)) refunded to the payers of the shares paid" : ""
        switch charge["state", as: String.self].flatMap(KioskChargeState.init(rawValue:)) {
        case .paid:
            let split = shares > 1 ? " in \(shares) shares" : ""
            let tips = charge[Key.tipCents.rawValue, as: Int64.self] ?? 0
            let tip = tips > 0 ? " + \(Money.format(tips)) in tips" : ""
            output.line("paid: \(amount)\(split)\(tip) (session \(charge["session_id", as: String.self] ?? "?"))")
            return 0
        case .expired:
            output.line("expired unpaid\(refunds)")
            return 2
        case .cancelled:
            output.line("cancelled\(refunds)")
            return 3
        default:
            output.line("failed: \(charge["problem", as: String.self] ?? "refused")")
            return 1
        }
    }

    /// Cancels a charge; returns the exit status of how it ended (paid if a payer got there first).
    private static func cancel(_ id: String, _ kiosk: KioskClient, _ output: Console) async throws -> Int32 {
        do {
            try await kiosk.cancel(id)
        } catch let error as DBusError
            where error.name == KioskInterface.ErrorName.alreadyPaid
            || error.name == KioskInterface.ErrorName.alreadyFinal
        {
            return report(try await kiosk.charge(id), output)
        } catch let error as DBusError where error.name == KioskInterface.ErrorName.cancelPending {
            output.line(error.message)
            return 4
        }
        // How it ended, with what the ledger refunded of a split's shares paid.
        return report(try await kiosk.charge(id), output)
    }

    /// Refunds a paid charge (or one payment of a split) through the kiosk, which answers only once the receipts
    /// verify; prints the amount of each refund its `Refunded` signal announced.
    private static func refund(
        _ id: String,
        paymentID: String?,
        amountCents: Cents?,
        _ kiosk: KioskClient,
        _ output: Console
    ) async throws -> Int32 {
        let signals = try await kiosk.events()
        let reply: String
        do {
            if let paymentID {
                reply = try await kiosk.refund(id, paymentID: paymentID, amountCents: amountCents ?? 0)
            } else {
                reply = try await kiosk.refund(id, amountCents: amountCents ?? 0)
            }
        } catch let error as DBusError
            where [
                KioskInterface.ErrorName.notPaid, KioskInterface.ErrorName.refundFailed,
                KioskInterface.ErrorName.unknownPayment, .invalidArgs,
            ].contains(error.name)
        {
            output.line("not refunded: \(error.message)")
            return 1
        }
        // Of a split refunded whole, one refund for each payment.
        let refundIDs = reply.split(separator: ",").map(String.init)
        // Each is signalled by now or soon after the reply; the bound only guards against a hang.
        let announced = try await withThrowingTaskGroup(of: [String: Int64].self) { group in
            group.addTask {
                var amounts: [String: Int64] = [:]
                for await case .refunded(id, let refundID, let cents) in signals where refundIDs.contains(refundID) {
                    amounts[refundID] = cents
                    if amounts.count == refundIDs.count { break }
                }
                return amounts
            }
            group.addTask {
                try await Task.sleep(for: .seconds(10))
                return [:]
            }
            let first = try await group.next() ?? [:]
            group.cancelAll()
            return first
        }
        for refundID in refundIDs {
            let cents = announced[refundID] ?? (refundIDs.count == 1 ? amountCents : nil)
            let amount = cents.map { Money.format($0) } ?? "the rest"
            output.line("refunded \(amount) of charge \(id): refund \(DisplayText.quoted(refundID)), receipt verified")
        }
        return 0
    }

    /// The payments of a split charge, one line each: what a refund of one payer names.
    static func payments(_ charge: [String: DBusVariant]) -> [String] {
        typealias PaymentKey = KioskInterface.PaymentKey
        let payments = charge[Key.payments.rawValue, as: [[String: DBusVariant]].self] ?? []
        return payments.map { payment in
            let id = payment[PaymentKey.paymentID.rawValue, as: String.self] ?? "?"
            let shares = (payment[PaymentKey.shareNumbers.rawValue, as: [Int32].self] ?? []).map(String.init)
            var parts = [
                "payment \(id)",
                (shares.count == 1 ? "share " : "shares ") + shares.joined(separator: ", "),
                Money.format(payment[PaymentKey.amountCents.rawValue, as: Int64.self] ?? 0),
            ]
            if let tip = payment[PaymentKey.tipCents.rawValue, as: Int64.self], tip > 0 {
                parts.append("tip \(Money.format(tip))")
            }
            if let refunded = payment[PaymentKey.refundedCents.rawValue, as: Int64.self], refunded > 0 {
                parts.append("refunded \(Money.format(refunded))")
            }
            return parts.joined(separator: "  ")
        }
    }

    static func describe(_ charge: [String: DBusVariant]) -> String {
        var parts = [charge["id", as: String.self] ?? "?", charge["state", as: String.self] ?? "?"]
        if let cents = charge["amount_cents", as: Int64.self] { parts.append(Money.format(cents)) }
        if let shares = charge[Key.shares.rawValue, as: Int32.self], shares > 1 {
            parts.append("\(charge[Key.sharesPaid.rawValue, as: Int32.self] ?? 0) of \(shares) shares paid")
        }
        if let tips = charge[Key.tipCents.rawValue, as: Int64.self], tips > 0 {
            parts.append("tips \(Money.format(tips))")
        }
        if let refunded = charge[Key.refundedCents.rawValue, as: Int64.self], refunded > 0 {
            parts.append("refunded \(Money.format(refunded))")
        }
        if let reference = charge["reference", as: String.self], !reference.isEmpty {
            parts.append("reference \(reference)")
        }
        if let session = charge["session_id", as: String.self] { parts.append("session \(session)") }
        if let problem = charge["problem", as: String.self] { parts.append("problem: \(problem)") }
        return parts.joined(separator: "  ")
    }

    private typealias Key = KioskInterface.ChargeKey

    static func explain(_ error: DBusError) -> String {
        switch error.name {
        case .serviceUnknown, .nameHasNoOwner:
            "no kiosk on the bus: is `gotchu kiosk` running? (systemctl status gotchu-kiosk)"
        case .accessDenied:
            "the bus refused: only members of the gotchu-pos group may call the kiosk (\(error.message))"
        default: error.message.isEmpty ? error.name.rawValue : error.message
        }
    }
}

/// Prints the web checkout of the EID on the air once for each address, and with `qr` draws its QR code; says once
/// why there is none when the ledger has no public URL.
private final class CheckoutPrinter: Sendable {
    private let output: Console
    private let qr: Bool
    private let state = Mutex((shown: String?.none, warned: false))

    init(output: Console, qr: Bool) {
        self.output = output
        self.qr = qr
    }

    /// Whether an address was printed: the charge waits for payers on a ledger with a public URL.
    var hasShown: Bool { state.withLock { $0.shown != nil } }

    /// Prints the charge's checkout address if it is new.
    func show(_ charge: [String: DBusVariant]?) {
        guard let charge,
            let chargeState = charge["state", as: String.self].flatMap(KioskChargeState.init(rawValue:)),
            !chargeState.isFinal
        else { return }
        let url = charge[KioskInterface.ChargeKey.checkoutURL.rawValue, as: String.self]
        let (print, warn) = state.withLock { state -> (Bool, Bool) in
            guard let url else {
                defer { state.warned = true }
                return (false, !state.warned)
            }
            defer { state.shown = url }
            return (state.shown != url, false)
        }
        if let url, print {
            output.line("pay on a phone: \(url)")
            if qr { output.qrCode(url) }
        } else if warn, qr {
            output.warning(
                "no QR code: the ledger has no public URL for its web checkout (its operator sets "
                    + "gotchu server --public-url)"
            )
        }
    }
}
