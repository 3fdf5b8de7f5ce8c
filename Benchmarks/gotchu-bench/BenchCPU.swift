#if canImport(Glibc)
    import Glibc
#endif

/// CPU time, user and system, from `getrusage`: this process's, and that of its children that ended and were waited
/// for. A benchmark reads it before and after a run; CPU per payment tells a change apart on a noisy machine, where
/// payments per second move by a tenth from run to run.
struct BenchCPU: Sendable {
    var own: Duration
    var children: Duration

    /// The CPU used so far.
    static func now() -> BenchCPU {
        BenchCPU(own: usage(RUSAGE_SELF.rawValue), children: usage(RUSAGE_CHILDREN.rawValue))
    }

    /// The CPU used since `start`.
    static func since(_ start: BenchCPU) -> BenchCPU {
        let end = now()
        return BenchCPU(own: end.own - start.own, children: end.children - start.children)
    }

    private static func usage(_ who: __rusage_who_t) -> Duration {
        var usage = rusage()
        guard getrusage(who, &usage) == 0 else { return .zero }
        func duration(_ time: timeval) -> Duration { .seconds(time.tv_sec) + .microseconds(time.tv_usec) }
        return duration(usage.ru_utime) + duration(usage.ru_stime)
    }
}
