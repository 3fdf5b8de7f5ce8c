import ArgumentParser
import GotchuKioskCLI

/// The kiosk alone: what a terminal runs, without the ledger server and its database drivers linked in.
@main
struct GotchuKioskCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gotchu-kiosk",
        abstract: KioskOptions.abstract,
        discussion: KioskOptions.discussion(command: "gotchu-kiosk") + """


            The same daemon as `gotchu kiosk`, in a smaller program for terminals.
            """
    )

    @OptionGroup var options: KioskOptions

    func run() async throws { try await options.run() }
}
