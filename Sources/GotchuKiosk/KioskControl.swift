import Foundation
import GotchuAPI
import GotchuCore
package import GotchuDBus
package import GotchuKioskClient

/// The kiosk's control interface for the point-of-sale, as ``KioskInterface`` names it: `io.gotchu.Kiosk1` at
/// `/io/gotchu/Kiosk1`. Its `State` property is a ``KioskStatus/State``; its charges are ``dictionary(_:)``s.
package enum KioskControl {
    /// The well-known bus name the kiosk owns (``KioskInterface/busName``).
    package static var busName: String { KioskInterface.busName }
    /// The interface name (``KioskInterface/name``).
    package static var interface: String { KioskInterface.name }
    /// The object's path (``KioskInterface/path``).
    package static var path: DBusObjectPath { KioskInterface.path }

    /// The D-Bus errors the methods reply with, besides `org.freedesktop.DBus.Error.InvalidArgs`.
    package typealias ErrorName = KioskInterface.ErrorName

    /// Serves the interface on `connection` until the calling task is cancelled: exports the object, owns
    /// ``busName`` (then calls `onServing`), and mirrors the kiosk's status and events as properties and signals.
    /// - Parameter metrics: counts the method calls by method and outcome; none when `nil`.
    package static func serve(
        _ kiosk: Kiosk,
        on connection: DBusConnection,
        metrics: KioskMetrics? = nil,
        onServing: @Sendable () async -> Void = {}
    ) async throws {
        // Subscribe first, so nothing that happens while the name is being acquired goes unannounced.
        let events = await kiosk.events()
        let updates = await kiosk.statusUpdates()
        let initial = await kiosk.status()
        try await connection.withExportedObject(object(kiosk, initial, connection, metrics: metrics), at: path) {
            do {
                try await connection.requestName(busName)
            } catch {
                throw DBusError(
                    .accessDenied,
                    "cannot own \(busName) (\(error)): another kiosk may be running, or the bus policy does not allow this user"
                )
            }
            await onServing()
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // Each property changes (and is announced) only when its value does. The charge goes first, then
                    // the checkout URL, so a client that sees a new state finds the charge (and its problem) and the
                    // address that go with it.
                    var state = DBusValue.string(initial.state.rawValue)
                    var charge = dictionary(initial.charge).dbusValue
                    var checkout = DBusValue.string(checkoutURL(initial))
                    for await status in updates {
                        let newState = DBusValue.string(status.state.rawValue)
                        let newCharge = dictionary(status.charge).dbusValue
                        let newCheckout = DBusValue.string(checkoutURL(status))
                        if newCharge != charge {
                            try? await connection.setProperty(
                                Property.currentCharge.rawValue,
                                of: interface,
                                at: path,
                                to: newCharge
                            )
                            charge = newCharge
                        }
                        if newCheckout != checkout {
                            try? await connection.setProperty(
                                Property.checkoutURL.rawValue,
                                of: interface,
                                at: path,
                                to: newCheckout
                            )
                            checkout = newCheckout
                        }
                        if newState != state {
                            try? await connection.setProperty(
                                Property.state.rawValue,
                                of: interface,
                                at: path,
                                to: newState
                            )
                            state = newState
                        }
                    }
                }

                group.addTask {
                    for await event in events {
                        let (member, arguments) = signal(for: event)
                        try? await connection.emitSignal(
                            path: path,
                            interface: interface,
                            member: member.rawValue,
                            arguments
                        )
                    }
                }
                await group.waitForAll()
            }
            try? await connection.releaseName(busName)
        }
    }

    /// A charge as a D-Bus dictionary, keyed by ``KioskInterface/ChargeKey``; empty for no charge. Absent fields are
    /// left out.
    package static func dictionary(_ charge: KioskCharge?) -> [String: DBusVariant] {
        guard let charge else { return [:] }
        var entries: [Key: DBusValue] = [
            .id: .string(charge.id),
            .amountCents: .int64(charge.amountCents),
            .shares: .int32(Int32(clamping: charge.shares)),
            .sharesPaid: .int32(Int32(clamping: charge.sharesPaid)),
            .paidCents: .int64(charge.paidCents),
            .tipCents: .int64(charge.tipCents),
            .refundedCents: .int64(charge.refundedCents),
            .reference: .string(charge.reference),
            .state: .string(charge.state.rawValue),
            .createdAt: .string(timestamp(charge.createdAt)),
            .updatedAt: .string(timestamp(charge.updatedAt)),
        ]
        if let sid = charge.sessionID { entries[.sessionID] = .string(sid) }
        if let eid = charge.eid { entries[.eid] = .string(eid.rawValue) }
        if let url = charge.checkoutURL { entries[.checkoutURL] = .string(url) }
        if let expiresAt = charge.expiresAt { entries[.expiresAt] = .string(timestamp(expiresAt)) }
        if let problem = charge.problem { entries[.problem] = .string(problem) }
        if !charge.payments.isEmpty { entries[.payments] = payments(charge.payments) }
        if !charge.tipPercents.isEmpty {
            entries[.tipPercents] = charge.tipPercents.map { Int32(clamping: $0) }.dbusValue
        }
        return Dictionary(uniqueKeysWithValues: entries.map { ($0.key.rawValue, DBusVariant($0.value)) })
    }

    /// A charge's payments as D-Bus dictionaries (`aa{sv}`), keyed by ``KioskInterface/PaymentKey``.
    static func payments(_ payments: [KioskPayment]) -> DBusValue {
        payments.map { payment -> [String: DBusVariant] in
            let entries: [KioskInterface.PaymentKey: DBusValue] = [
                .paymentID: .string(payment.paymentID),
                .shareNumbers: payment.shareNumbers.map { Int32(clamping: $0) }.dbusValue,
                .amountCents: .int64(payment.amountCents),
                .tipCents: .int64(payment.tipCents),
                .refundedCents: .int64(payment.refundedCents),
                .paidAt: .string(timestamp(payment.paidAt)),
            ]
            return Dictionary(uniqueKeysWithValues: entries.map { ($0.key.rawValue, DBusVariant($0.value)) })
        }.dbusValue
    }

    /// The `CheckoutURL` property: the web checkout of the EID on the air while the charge waits for payers; empty
    /// otherwise.
    package static func checkoutURL(_ status: KioskStatus) -> String {
        guard status.state == .advertising || status.state == .locked else { return "" }
        return status.charge?.checkoutURL ?? ""
    }

    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    static func signal(for event: KioskEvent) -> (Signal, [DBusValue]) {
        let id = DBusValue.string(event.charge.id)
        switch event.kind {
        case .advertising: return (.advertising, [id, .string(event.charge.eid?.rawValue ?? "")])
        case .locked: return (.locked, [id])
        case .sharePaid:
            let charge = event.charge
            return (
                .sharePaid, [id, .int32(Int32(clamping: charge.sharesPaid)), .int32(Int32(clamping: charge.shares))]
            )
        case .paid:
            return (.paymentSucceeded, [id, .int64(event.charge.amountCents), .string(event.charge.sessionID ?? "")])
        case .expired: return (.expired, [id])
        case .cancelled: return (.cancelled, [id])
        case .failed(let reason), .problem(let reason): return (.error, [id, .string(reason)])
        case .refunded(let refundID, let cents): return (.refunded, [id, .string(refundID), .int64(cents)])
        }
    }

    typealias Method = KioskInterface.Method
    typealias Property = KioskInterface.Property
    typealias Signal = KioskInterface.Signal
    typealias Key = KioskInterface.ChargeKey

    /// The interface's methods, as counted in ``KioskMetrics``.
    static let methods = KioskInterface.Method.allCases.map(\.rawValue)

    /// The exported object, each method call counted in `metrics` by its outcome.
    private static func object(
        _ kiosk: Kiosk,
        _ status: KioskStatus,
        _ connection: DBusConnection,
        metrics: KioskMetrics?
    ) -> DBusObject {
        var object = object(kiosk, status, connection)
        guard let metrics else { return object }
        for index in object.interfaces.indices {
            object.interfaces[index].methods = object.interfaces[index].methods.map { method in
                var counted = method
                let name = method.name
                counted.handler = { message in
                    do {
                        let reply = try await method.handler(message)
                        metrics.controlCall(name, error: nil)
                        return reply
                    } catch let error as DBusError {
                        metrics.controlCall(name, error: error.name.rawValue)
                        throw error
                    } catch {
                        metrics.controlCall(name, error: DBusError.Name.failed.rawValue)
                        throw error
                    }
                }
                return counted
            }
        }
        return object
    }

    private static func object(_ kiosk: Kiosk, _ status: KioskStatus, _ connection: DBusConnection) -> DBusObject {
        DBusObject(interfaces: [
            DBusInterface(
                interface,
                methods: [
                    DBusMethod(Method.charge.rawValue, inputs: [.int64, .string], outputs: [.string]) { message in
                        let amount = message.argument(0, as: Int64.self) ?? 0
                        let reference = message.argument(1, as: String.self) ?? ""
                        let charge = try await answer { () throws(KioskError) in
                            try await kiosk.charge(amountCents: amount, reference: reference)
                        }
                        return [.string(charge.id)]
                    },
                    DBusMethod(Method.chargeSplit.rawValue, inputs: [.int64, .string, .int32], outputs: [.string]) {
                        message in
                        let amount = message.argument(0, as: Int64.self) ?? 0
                        let reference = message.argument(1, as: String.self) ?? ""
                        let shares = Int(message.argument(2, as: Int32.self) ?? 0)
                        let charge = try await answer { () throws(KioskError) in
                            try await kiosk.charge(amountCents: amount, reference: reference, shares: shares)
                        }
                        return [.string(charge.id)]
                    },
                    DBusMethod(
                        Method.chargeWithTips.rawValue,
                        inputs: [.int64, .string, .int32, .array(.int32)],
                        outputs: [.string]
                    ) { message in
                        let amount = message.argument(0, as: Int64.self) ?? 0
                        let reference = message.argument(1, as: String.self) ?? ""
                        let shares = Int(message.argument(2, as: Int32.self) ?? 0)
                        let percents = (message.argument(3, as: [Int32].self) ?? []).map(Int.init)
                        let charge = try await answer { () throws(KioskError) in
                            let tips: TipPrompt
                            do throws(TipPrompt.Invalid) {
                                tips = try TipPrompt(percents: percents)
                            } catch {
                                throw .invalidTips(error.description)
                            }
                            return try await kiosk.charge(
                                amountCents: amount,
                                reference: reference,
                                shares: shares,
                                tipPrompt: tips
                            )
                        }
                        return [.string(charge.id)]
                    },
                    DBusMethod(Method.cancel.rawValue, inputs: [.string]) { message in
                        let id = message.argument(0, as: String.self) ?? ""
                        let charge = try await answer { () throws(KioskError) in try await kiosk.cancel(id: id) }
                        switch charge.state {
                        case .cancelled: break
                        case .paid:
                            throw DBusError(ErrorName.alreadyPaid, "charge \(id) was paid before it could be cancelled")
                        default:
                            throw DBusError(ErrorName.alreadyFinal, "charge \(id) ended \(charge.state.rawValue) first")
                        }
                        return []
                    },
                    DBusMethod(Method.refund.rawValue, inputs: [.string, .int64], outputs: [.string]) { message in
                        let id = message.argument(0, as: String.self) ?? ""
                        let amount = message.argument(1, as: Int64.self) ?? 0
                        // Each refund made is signalled (`Refunded`) once its receipt verifies.
                        let refunds = try await answer { () throws(KioskError) in
                            try await kiosk.refund(id: id, amountCents: amount == 0 ? nil : amount)
                        }
                        return [.string(refunds.map(\.refundID).joined(separator: ","))]
                    },
                    DBusMethod(Method.refundPayment.rawValue, inputs: [.string, .string, .int64], outputs: [.string]) {
                        message in
                        let id = message.argument(0, as: String.self) ?? ""
                        let payment = message.argument(1, as: String.self) ?? ""
                        let amount = message.argument(2, as: Int64.self) ?? 0
                        let refunds = try await answer { () throws(KioskError) in
                            guard !payment.isEmpty else {
                                throw .unknownPayment(chargeID: id, paymentID: "", known: [])
                            }
                            return try await kiosk.refund(
                                id: id,
                                paymentID: payment,
                                amountCents: amount == 0 ? nil : amount
                            )
                        }
                        return [.string(refunds.map(\.refundID).joined(separator: ","))]
                    },
                    DBusMethod(
                        Method.getCharge.rawValue,
                        inputs: [.string],
                        outputs: [.dictionary(key: .string, value: .variant)]
                    ) { message in
                        let id = message.argument(0, as: String.self) ?? ""
                        let charge = try await answer { () throws(KioskError) in try await kiosk.charge(id: id) }
                        return [dictionary(charge).dbusValue]
                    },
                ],
                properties: [
                    DBusProperty(Property.state.rawValue, .string(status.state.rawValue)),
                    DBusProperty(Property.currentCharge.rawValue, dictionary(status.charge).dbusValue),
                    DBusProperty(Property.checkoutURL.rawValue, .string(checkoutURL(status))),
                ],
                signals: [
                    DBusSignalDescription(Signal.advertising.rawValue, arguments: [.string, .string]),
                    DBusSignalDescription(Signal.locked.rawValue, arguments: [.string]),
                    DBusSignalDescription(Signal.sharePaid.rawValue, arguments: [.string, .int32, .int32]),
                    DBusSignalDescription(Signal.paymentSucceeded.rawValue, arguments: [.string, .int64, .string]),
                    DBusSignalDescription(Signal.expired.rawValue, arguments: [.string]),
                    DBusSignalDescription(Signal.cancelled.rawValue, arguments: [.string]),
                    DBusSignalDescription(Signal.error.rawValue, arguments: [.string, .string]),
                    DBusSignalDescription(Signal.refunded.rawValue, arguments: [.string, .string, .int64]),
                ]
            )
        ])
    }

    /// Runs a kiosk request, turning its refusal into the D-Bus error the caller gets.
    private static func answer<Result>(_ body: () async throws(KioskError) -> Result) async throws(DBusError) -> Result
    {
        do {
            return try await body()
        } catch {
            switch error {
            case .busy: throw DBusError(ErrorName.busy, error.description)
            case .invalidAmount, .invalidShares, .invalidReference, .invalidTips:
                throw DBusError(.invalidArgs, error.description)
            case .notFound: throw DBusError(ErrorName.notFound, error.description)
            case .alreadyFinal: throw DBusError(ErrorName.alreadyFinal, error.description)
            case .cancelPending: throw DBusError(ErrorName.cancelPending, error.description)
            case .storage: throw DBusError(.failed, error.description)
            case .notPaid: throw DBusError(ErrorName.notPaid, error.description)
            case .refundFailed: throw DBusError(ErrorName.refundFailed, error.description)
            case .unknownPayment: throw DBusError(ErrorName.unknownPayment, error.description)
            case .notSplit, .paymentRequired: throw DBusError(.invalidArgs, error.description)
            }
        }
    }
}
