import ArgumentParser
import Foundation
import GotchuBlueZ
import GotchuCore
import GotchuDBus
import GotchuSimulatedRadio

/// Which radio a flow uses, and its settings.
struct RadioOptions: ParsableArguments {
    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case bluez
        case sim
        case none
    }

    /// What the device does on the air; picks the default simulated position.
    enum Role {
        case receiver
        case payer
    }

    @Option(
        help:
            "bluez: the machine's Bluetooth adapter through BlueZ. sim: the simulated air shared by processes on this machine. none: nothing on the air; a receiver takes payments on its web checkout only (its QR code: --qr)."
    )
    var radio: Kind = .bluez

    @OptionGroup(title: "BlueZ") var bluez: BlueZCommandOptions

    @Option(
        name: .customLong("service-uuid"),
        help: ArgumentHelp("Service UUID to advertise or scan for: 16-bit (feed) or 128-bit.", valueName: "uuid")
    )
    var serviceUUIDText = "feed"

    @Option(
        name: .customLong("position"),
        help: ArgumentHelp(
            "sim: where this device stands, in metres (x,y). Default: 0,0 for a receiver, 0.2,0 for a payer.",
            valueName: "x,y"
        )
    )
    var positionText: String?

    @Option(
        help: ArgumentHelp(
            "sim: the shared air directory (default: $XDG_RUNTIME_DIR/gotchu-air, else /tmp/gotchu-air-UID).",
            valueName: "path"
        )
    )
    var air: String?

    var serviceUUID: BluetoothUUID {
        get throws {
            guard let uuid = BluetoothUUID(serviceUUIDText) else {
                throw ValidationError("--service-uuid must be a 16-bit (feed) or 128-bit Bluetooth UUID")
            }
            return uuid
        }
    }

    /// The radio `--radio` names; a BlueZ one advertises as `advertisingType` (only receivers advertise).
    func makeRadio(role: Role, advertisingType: BlueZAdvertisingType = .broadcast) async throws -> any Radio {
        switch radio {
        case .sim:
            let position = try parsePosition(default: role == .receiver ? Position(x: 0, y: 0) : Position(x: 0.2, y: 0))
            return try await Self.simulatedRadio(air: air.map { URL(fileURLWithPath: $0) }, role: role, at: position)
        case .none:
            guard role == .receiver else {
                throw ValidationError(
                    "--radio none only suits a receiver: a payer scans, and needs a radio to hear with"
                )
            }
            return NoRadio()
        case .bluez:
            return try await Self.bluezRadio(
                bus: try bluez.dbusBus,
                adapter: bluez.adapter,
                advertisingType: advertisingType
            )
        }
    }

    /// A device on the simulated air shared by processes on this machine.
    static func simulatedRadio(air: URL?, role: Role, at position: Position) async throws -> any Radio {
        let name = "\(role == .receiver ? "terminal" : "payer") \(ProcessInfo.processInfo.processIdentifier)"
        if let air {
            do {
                try SharedAirRadio.prepare(directory: air)
            } catch {
                throw CLIError("--air \(error)")
            }
        }
        return try await SharedAirRadio(
            directory: air ?? SharedAirRadio.defaultDirectory,
            peer: SimulatedPeer(name: name, at: position),
            seed: UInt64.random(in: .min ... .max)
        )
    }

    /// The machine's Bluetooth adapter through BlueZ.
    static func bluezRadio(
        bus: DBusConnection.Bus,
        adapter: String?,
        advertisingType: BlueZAdvertisingType = .broadcast
    ) async throws -> BlueZRadio {
        do {
            return try await BlueZRadio.connect(
                to: bus,
                configuration: .init(adapter: adapter, advertisingType: advertisingType)
            )
        } catch {
            throw CLIError(
                "cannot use Bluetooth through BlueZ (\(error)); `gotchu doctor` says what to fix, or try --radio sim"
            )
        }
    }

    private func parsePosition(default fallback: Position) throws -> Position {
        guard let positionText else { return fallback }
        let parts = positionText.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let x = parts[0], let y = parts[1], x.isFinite, y.isFinite else {
            throw ValidationError("--position must be two numbers in metres, such as 0.2,0")
        }
        return Position(x: x, y: y)
    }
}
