package import Foundation
package import GotchuCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `gotchu kiosk calibrate`: measures the terminal's RSSI at the reference distance and keeps it in the config file.
///
/// The operator holds a phone advertising a Gotchu EID (`gotchu advertise`) 1 m from the terminal, turning it now
/// and then, while the terminal scans. The median of what the terminal heard from that phone is its calibration: the
/// path between the two is the same both ways, so it stands for what the phone hears from the terminal, as long as
/// the phone transmits about as strongly as the terminal does.
package enum KioskCalibration {
    /// What one calibration measured.
    package struct Measurement: Hashable, Sendable {
        /// The EID the phone advertised.
        package var eid: EID
        /// The median RSSI heard from it, in dBm.
        package var medianRSSI: Int16
        /// How many sightings with RSSI the median is over.
        package var samples: Int

        /// Creates a measurement.
        package init(eid: EID, medianRSSI: Int16, samples: Int) {
            self.eid = eid
            self.medianRSSI = medianRSSI
            self.samples = samples
        }
    }

    /// Why a calibration failed.
    package struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// What went wrong, for the operator.
        package var description: String

        /// Creates a failure.
        package init(_ description: String) { self.description = description }
    }

    /// The fewest sightings a median is taken over.
    package static let minimumSamples = 10

    /// The median RSSI of the advertiser in `sightings`: the one advertising `eid`, or else the one heard most
    /// often. Sightings without RSSI are skipped.
    package static func measure(_ sightings: [Sighting], eid: EID? = nil) throws(Failure) -> Measurement {
        var byEID: [EID: [Int16]] = [:]
        for sighting in sightings {
            guard let rssi = sighting.rssi else { continue }
            byEID[sighting.eid, default: []].append(rssi)
        }
        let chosen =
            eid
            ?? byEID.max { lhs, rhs in
                lhs.value.count != rhs.value.count ? lhs.value.count < rhs.value.count : lhs.key > rhs.key
            }?.key
        guard let chosen, let values = byEID[chosen], !values.isEmpty else {
            throw Failure(
                eid.map { "heard nothing from \($0.grouped) with its signal strength" }
                    ?? "heard no Gotchu advertiser with its signal strength; is the phone advertising?"
            )
        }
        guard values.count >= minimumSamples else {
            throw Failure(
                "heard \(chosen.grouped) only \(values.count) times (at least \(minimumSamples) are needed); "
                    + "scan longer or hold the phone steady"
            )
        }
        if eid == nil, byEID.count > 1 {
            let others = byEID.keys.filter { $0 != chosen }.map(\.grouped).sorted().joined(separator: ", ")
            throw Failure(
                "heard several advertisers (\(chosen.grouped), \(others)); name the phone's EID with --eid"
            )
        }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        let median =
            sorted.count % 2 == 1
            ? Double(sorted[middle]) : (Double(sorted[middle - 1]) + Double(sorted[middle])) / 2
        let rounded = Int16(median.rounded())
        guard Calibration.plausibleCalibratedRSSI.contains(rounded) else {
            let range = Calibration.plausibleCalibratedRSSI
            throw Failure(
                "the median, \(rounded) dBm, is outside \(range.lowerBound) to \(range.upperBound) dBm: "
                    + "is the phone 1 m away, and nothing between it and the terminal?"
            )
        }
        return Measurement(eid: chosen, medianRSSI: rounded, samples: values.count)
    }

    /// Scans on `radio` for `duration` (its own clock) and measures what it heard.
    package static func scan(
        _ radio: any Radio,
        serviceUUID: BluetoothUUID,
        duration: Duration,
        eid: EID? = nil
    ) async throws -> Measurement {
        let stream = try await radio.scan(ScanFilter(serviceUUID: serviceUUID))
        let collector = Task {
            var sightings: [Sighting] = []
            for try await sighting in stream { sightings.append(sighting) }
            return sightings
        }
        try await radio.sleep(for: duration)
        collector.cancel()
        let sightings = (try? await collector.value) ?? []
        return try measure(sightings, eid: eid)
    }

    /// Sets `calibrated_rssi` in the config file at `file` (TOML, or JSON by its `.json` extension), keeping every
    /// other line of a TOML file as it was, and writes it back in place of the old one.
    package static func write(_ calibratedRSSI: Int16, to file: URL) throws(Failure) {
        let key = "calibrated_rssi"
        let value = "\"\(calibratedRSSI)\""
        let old: Data
        do {
            old = try Data(contentsOf: file)
        } catch {
            throw Failure("cannot read \(file.path): \(error.localizedDescription)")
        }
        var new: Data
        if file.pathExtension.lowercased() == "json" {
            guard var object = (try? JSONSerialization.jsonObject(with: old)) as? [String: Any] else {
                throw Failure("\(file.path) is not a JSON object")
            }
            object[key] = String(calibratedRSSI)
            guard
                let data = try? JSONSerialization.data(
                    withJSONObject: object,
                    options: [.prettyPrinted, .sortedKeys]
                )
            else { throw Failure("cannot encode \(file.path)") }
            new = data
            new.append(UInt8(ascii: "\n"))
        } else {
            guard let text = String(data: old, encoding: .utf8) else { throw Failure("\(file.path) is not UTF-8") }
            var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if lines.last == "" { lines.removeLast() }
            // Only a top-level key: before the first table header.
            let firstTable = lines.firstIndex { $0.trimmingCharacters(in: .whitespaces).hasPrefix("[") } ?? lines.count
            let line = "\(key) = \(value)"
            if let index = lines[..<firstTable].firstIndex(where: {
                let trimmed = $0.trimmingCharacters(in: .whitespaces)
                return trimmed.hasPrefix(key)
                    && trimmed.dropFirst(key.count).trimmingCharacters(in: .whitespaces).hasPrefix("=")
            }) {
                lines[index] = line
            } else {
                lines.insert(line, at: firstTable)
            }
            new = Data((lines.joined(separator: "\n") + "\n").utf8)
        }
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).calibrate-\(ProcessInfo.processInfo.processIdentifier)")
        do {
            try new.write(to: temporary)
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            if let permissions = attributes[.posixPermissions] {
                try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: temporary.path)
            }
            // rename(2): the config is replaced whole or not at all.
            guard rename(temporary.path, file.path) == 0 else {
                throw Failure("cannot replace \(file.path): error \(errno)")
            }
        } catch let failure as Failure {
            try? FileManager.default.removeItem(at: temporary)
            throw failure
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw Failure("cannot write \(file.path): \(error.localizedDescription)")
        }
    }
}
