import GotchuCore

/// Opens the BlueZ radio on the system bus.
enum BlueZRadioFactory {
    static func make(adapter: String?) async throws -> any Radio {
        throw CLIError("the BlueZ radio is not available in this build")
    }
}
