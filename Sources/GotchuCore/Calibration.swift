/// How a terminal's signal is measured against a reference, so that terminals of different makes compare.
///
/// A terminal carries one of two references, and payers rank by attenuation (reference − RSSI):
/// - its calibration, the RSSI a phone measured 1 m from it (``Advertisement/calibratedRSSI``). It includes what
///   the announced TX power leaves out: the terminal's antenna and enclosure, and the loss over the first metre.
///   On the attenuation scale it counts as calibration + ``referenceLoss``, the free-space loss over 1 m.
/// - its TX power, as announced in the TX Power Level AD field, when it is not calibrated.
///
/// Values no real radio sends are ignored rather than trusted: a calibration outside ``plausibleCalibratedRSSI`` or
/// a TX power outside ``plausibleTxPower`` is as if absent, so a garbled or hostile byte cannot make a terminal
/// look nearer than its signal says.
public enum Calibration {
    /// The distance a calibration is measured at, in metres.
    public static let referenceDistance = 1.0
    /// Free-space loss over the first metre at 2.44 GHz, in dB (Friis: 20·log10(4π·1 m / 12.3 cm) ≈ 40.2).
    public static let referenceLoss: Int16 = 41
    /// Calibrations accepted, in dBm: a BLE device 1 m away reads from about −30 (a +20 dBm controller) to about
    /// −90 (−40 dBm); anything else is garbage.
    public static let plausibleCalibratedRSSI: ClosedRange<Int16> = -100 ... -20
    /// TX powers accepted, in dBm: the Core Specification lets controllers transmit from −127 to +20 dBm, and no
    /// controller offers settings below about −40.
    public static let plausibleTxPower: ClosedRange<Int16> = -40...20

    /// The reference of an advertiser that announced `txPower` and carries `calibratedRSSI`: the calibration plus
    /// ``referenceLoss`` when it is plausible, otherwise the TX power when it is plausible, otherwise `nil`.
    public static func referencePower(txPower: Int16?, calibratedRSSI: Int16?) -> Int16? {
        if let calibratedRSSI, plausibleCalibratedRSSI.contains(calibratedRSSI) {
            return calibratedRSSI + referenceLoss
        }
        if let txPower, plausibleTxPower.contains(txPower) { return txPower }
        return nil
    }

    /// The service data carrying a calibration: one byte, the calibrated RSSI as a signed 8-bit value.
    public static func serviceData(_ calibratedRSSI: Int16) -> [UInt8] {
        [UInt8(bitPattern: Int8(clamping: calibratedRSSI))]
    }

    /// The calibration in service data under ``BluetoothUUID/gotchuCalibration``; `nil` unless exactly one byte.
    /// Plausibility is judged where it is used (``referencePower(txPower:calibratedRSSI:)``).
    public static func calibratedRSSI(serviceData: some Collection<UInt8>) -> Int16? {
        guard serviceData.count == 1, let byte = serviceData.first else { return nil }
        return Int16(Int8(bitPattern: byte))
    }
}
