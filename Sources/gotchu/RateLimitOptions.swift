import ArgumentParser
import GotchuLedgerServer

/// The request rates `gotchu server` allows per client address or per user, each as a rate and a burst.
struct RateLimitOptions: ParsableArguments {
    private typealias Bounds = ServerCommand.Bounds

    @Option(
        help: ArgumentHelp(
            "POST /sessions/resolve per client address: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var resolveRate: Double = 10

    @Option(
        help: ArgumentHelp("POST /sessions/resolve per client address: burst (\(Bounds.burst)).", valueName: "count")
    )
    var resolveBurst = 20

    @Option(
        help: ArgumentHelp(
            "POST /sessions/lock per client address: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var lockRate: Double = 10

    @Option(help: ArgumentHelp("POST /sessions/lock per client address: burst (\(Bounds.burst)).", valueName: "count"))
    var lockBurst = 20

    @Option(
        help: ArgumentHelp(
            "POST /sessions/lock per user: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var userLockRate: Double = 2

    @Option(help: ArgumentHelp("POST /sessions/lock per user: burst (\(Bounds.burst)).", valueName: "count"))
    var userLockBurst = 5

    @Option(
        help: ArgumentHelp(
            "POST /wallet/send per user: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var sendRate: Double = 5

    @Option(help: ArgumentHelp("POST /wallet/send per user: burst (\(Bounds.burst)).", valueName: "count"))
    var sendBurst = 10

    @Option(
        help: ArgumentHelp(
            "POST /wallet/payouts per user: requests per second (0: no limit, else \(Bounds.rate)).",
            valueName: "per-second"
        )
    )
    var payoutRate: Double = 5

    @Option(help: ArgumentHelp("POST /wallet/payouts per user: burst (\(Bounds.burst)).", valueName: "count"))
    var payoutBurst = 10

    /// Each limit: its options' common prefix, its rate, its burst.
    private var pairs: [(name: String, rate: Double, burst: Int)] {
        [
            ("resolve", resolveRate, resolveBurst), ("lock", lockRate, lockBurst),
            ("user-lock", userLockRate, userLockBurst), ("send", sendRate, sendBurst),
            ("payout", payoutRate, payoutBurst),
        ]
    }

    /// Refuses a rate or burst out of its range. Called by ``ServerCommand/validate()`` in its place among the other
    /// checks, so the first error reported stays the same.
    func check() throws {
        for (name, rate, burst) in pairs {
            // NaN fails every comparison, so `contains` refuses it along with infinities.
            guard rate == 0 || Bounds.rate.contains(rate) else {
                throw ValidationError("--\(name)-rate must be 0 (no limit) or \(Bounds.rate), got \(rate)")
            }
            guard Bounds.burst.contains(burst) else {
                throw ValidationError("--\(name)-burst must be \(Bounds.burst), got \(burst)")
            }
        }
    }

    /// Sets the five rate limits of `limits`; a rate of 0 sets none.
    func apply(to limits: inout LedgerLimits) {
        func rate(_ perSecond: Double, _ burst: Int) -> RateLimit? {
            perSecond > 0 ? RateLimit(perSecond: perSecond, burst: burst) : nil
        }
        limits.resolvePerAddress = rate(resolveRate, resolveBurst)
        limits.lockPerAddress = rate(lockRate, lockBurst)
        limits.lockPerUser = rate(userLockRate, userLockBurst)
        limits.sendPerUser = rate(sendRate, sendBurst)
        limits.payoutPerUser = rate(payoutRate, payoutBurst)
    }
}
