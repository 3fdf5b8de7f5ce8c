package import Foundation
import Synchronization

/// A clock the tests move by hand; the store and the token authority both read it.
package final class ManualClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))

    package init() {}

    package func now() -> Date { current.withLock { $0 } }

    package func advance(seconds: Double) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}
