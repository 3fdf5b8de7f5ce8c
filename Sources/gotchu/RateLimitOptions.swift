import ArgumentParser
import GotchuLedgerServer
import GotchuSettings

/// The request rates `gotchu server` allows per client address or per user, each as a rate and a burst: the options
/// of the settings of the same names in ``LedgerServerSettingsSchema``.
struct RateLimitOptions: ParsableArguments {
    private static let settings = LedgerServerSettingsSchema()

    @Option(help: settings.resolveRate.help) var resolveRate: String?
    @Option(help: settings.resolveBurst.help) var resolveBurst: String?
    @Option(help: settings.lockRate.help) var lockRate: String?
    @Option(help: settings.lockBurst.help) var lockBurst: String?
    @Option(help: settings.userLockRate.help) var userLockRate: String?
    @Option(help: settings.userLockBurst.help) var userLockBurst: String?
    @Option(help: settings.sendRate.help) var sendRate: String?
    @Option(help: settings.sendBurst.help) var sendBurst: String?
    @Option(help: settings.payoutRate.help) var payoutRate: String?
    @Option(help: settings.payoutBurst.help) var payoutBurst: String?
}
