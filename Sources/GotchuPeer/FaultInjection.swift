import Foundation

/// Crash points for recovery tests: with `GOTCHU_FAULT=after-lock` or `after-send` in the environment, the payer
/// kills itself with SIGKILL at that point, exactly as a power cut or the OOM killer would.
enum FaultInjection: String {
    /// After the lock succeeded, before the payment is sent.
    case afterLock = "after-lock"
    /// After the server answered the payment, before the journal records the outcome.
    case afterSend = "after-send"

    static func crashIfRequested(at point: FaultInjection) {
        guard ProcessInfo.processInfo.environment["GOTCHU_FAULT"] == point.rawValue else { return }
        kill(getpid(), SIGKILL)
    }
}
