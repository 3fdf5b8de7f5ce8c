import Foundation
import Synchronization

/// The back-off of password logins: after a few failures a client address, and separately an account, must wait
/// before its next attempt, and every further failure doubles the wait (up to a cap). A refused attempt is answered
/// 429 `rate-limited` with `Retry-After`, before any password is checked, so a guesser gets neither an answer nor
/// the server's time. The account's count is keyed by the address tried, known or not, so the answer reveals nothing
/// about which accounts exist.
public struct LoginBackoff: Sendable, Hashable {
    /// Failures one account may have before it must wait.
    public var freeFailuresPerAccount = 5
    /// Failures one client address may have before it must wait (higher: many people can share one address).
    public var freeFailuresPerAddress = 20
    /// The first wait; each failure after it doubles it.
    public var firstDelay: Duration = .seconds(1)
    /// The longest wait.
    public var maximumDelay: Duration = .seconds(15 * 60)
    /// A count is forgotten this long after its last failure.
    public var forgetAfter: Duration = .seconds(3600)

    /// The default back-off.
    public init() {}
}

/// The failure counts of ``LoginBackoff``, kept in this process's memory and bounded like ``RateLimiter``'s buckets.
///
/// An attempt counts as a failure from the moment it starts, and a success takes it back: concurrent guesses cannot
/// all slip in while the first is still being checked.
final class LoginThrottle: Sendable {
    private struct Entry {
        var failures: Int
        var blockedUntil: Date
        var last: Date
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var lastSweep: Date = .distantPast
    }

    let backoff: LoginBackoff
    let capacity: Int
    private let clock: @Sendable () -> Date
    private let state = Mutex(State())

    init(backoff: LoginBackoff, capacity: Int, clock: @escaping @Sendable () -> Date) {
        self.backoff = backoff
        self.capacity = capacity
        self.clock = clock
    }

    /// Starts an attempt for `account` (a normalized address) from `address`: throws how long to wait if either is
    /// made to wait now, else counts the attempt as a failure of both.
    func begin(account: String, address: String) throws(RateLimiter.Exceeded) {
        let now = clock()
        let keys = [
            ("account:" + account, backoff.freeFailuresPerAccount),
            ("address:" + address, backoff.freeFailuresPerAddress),
        ]
        let wait: Int? = state.withLock { state in
            var longest: TimeInterval = 0
            for (key, _) in keys {
                if let entry = current(state, key, now: now), entry.blockedUntil > now {
                    longest = max(longest, entry.blockedUntil.timeIntervalSince(now))
                }
            }
            if longest > 0 { return RateLimiter.retryAfter(seconds: longest) }
            if state.entries.count + keys.count > capacity { sweep(&state, now: now) }
            guard state.entries.count + keys.count <= capacity else { return 1 }
            for (key, free) in keys {
                var entry = current(state, key, now: now) ?? Entry(failures: 0, blockedUntil: now, last: now)
                entry.failures += 1
                entry.last = now
                if entry.failures >= free {
                    entry.blockedUntil = now.addingTimeInterval(delay(after: entry.failures - free))
                }
                state.entries[key] = entry
            }
            return nil
        }
        if let wait { throw RateLimiter.Exceeded(retryAfter: wait) }
    }

    /// The attempt begun for `account` from `address` succeeded: the account starts afresh and the address's count
    /// takes this attempt back.
    func succeeded(account: String, address: String) {
        state.withLock { state in
            state.entries["account:" + account] = nil
            takeBack("address:" + address, free: backoff.freeFailuresPerAddress, from: &state)
        }
    }

    /// The attempt begun for `account` from `address` ended for a reason of the server's (its store unavailable): it
    /// is taken back from both counts, as if it had not been made.
    func withdrawn(account: String, address: String) {
        state.withLock { state in
            takeBack("account:" + account, free: backoff.freeFailuresPerAccount, from: &state)
            takeBack("address:" + address, free: backoff.freeFailuresPerAddress, from: &state)
        }
    }

    /// Uncounts one attempt of `key`, lifting its wait if that brings it back within its `free` failures.
    private func takeBack(_ key: String, free: Int, from state: inout State) {
        guard var entry = state.entries[key] else { return }
        entry.failures -= 1
        if entry.failures < free { entry.blockedUntil = entry.last }
        state.entries[key] = entry.failures > 0 ? entry : nil
    }

    /// The wait after the `extra`-th failure past the free ones: the first delay doubled `extra` times, capped.
    private func delay(after extra: Int) -> TimeInterval {
        let first = Double(backoff.firstDelay.components.seconds)
        let maximum = Double(backoff.maximumDelay.components.seconds)
        return min(maximum, first * pow(2, Double(min(extra, 62))))
    }

    private func current(_ state: State, _ key: String, now: Date) -> Entry? {
        guard let entry = state.entries[key] else { return nil }
        let forget = Double(backoff.forgetAfter.components.seconds)
        return now.timeIntervalSince(entry.last) >= forget && entry.blockedUntil <= now ? nil : entry
    }

    private func sweep(_ state: inout State, now: Date) {
        guard now.timeIntervalSince(state.lastSweep) >= 1 || now < state.lastSweep else { return }
        state.lastSweep = now
        let forget = Double(backoff.forgetAfter.components.seconds)
        state.entries = state.entries.filter {
            now.timeIntervalSince($0.value.last) < forget || $0.value.blockedUntil > now
        }
    }
}
