import Foundation

/// Fault points for recovery tests, chosen with `GOTCHU_FAULT` in the environment.
///
/// `after-lock` and `after-send` make the payer kill itself with SIGKILL at that point, exactly as a power cut or the
/// OOM killer would. The `hold-…` points stop the flow at that point, say so on standard error
/// (`fault: holding at POINT`) and wait for the interruption (Ctrl-C) before going on, so a test can interrupt at an
/// exact step instead of racing a signal against the clock.
///
/// Debug builds only (the ones the tests run): a release build, the one packaged and shipped, ignores `GOTCHU_FAULT`,
/// so no environment variable can make a shipped payer kill or stop itself.
enum FaultInjection: String {
    /// After the lock succeeded, before the payment is sent.
    case afterLock = "after-lock"
    /// After the server answered the payment, before the journal records the outcome.
    case afterSend = "after-send"
    /// The payer holds the lock and has not yet told the flow so.
    case holdAfterLock = "hold-after-lock"
    /// The payer's flow decided to send; the request has not left yet.
    case holdBeforeSend = "hold-before-send"
    /// The receiver read its session's status once and stops watching it.
    case holdWatching = "hold-watching"

    private static var requested: String? {
        #if DEBUG
            ProcessInfo.processInfo.environment["GOTCHU_FAULT"]
        #else
            nil
        #endif
    }

    static func crashIfRequested(at point: FaultInjection) {
        guard requested == point.rawValue else { return }
        kill(getpid(), SIGKILL)
    }

    /// Holds at `point` until `release` returns, if that is the requested fault.
    static func holdIfRequested(at point: FaultInjection, until release: () async -> Void) async {
        guard requested == point.rawValue else { return }
        FileHandle.standardError.write(Data("fault: holding at \(point.rawValue)\n".utf8))
        await release()
    }
}

/// Fires once; every wait, before or after, returns once it has fired.
final class Latch: @unchecked Sendable {
    // Unchecked: the state is guarded by `lock`.
    private let lock = NSLock()
    private var fired = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Fires the latch, releasing every waiter.
    func fire() {
        let released = lock.withLock {
            fired = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in released { waiter.resume() }
    }

    /// Waits until the latch has fired.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock {
                if fired { return true }
                waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
