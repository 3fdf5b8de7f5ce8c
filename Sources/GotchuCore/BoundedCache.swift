import Synchronization

/// A dictionary shared between threads that holds at most `capacity` entries: when full, the next insertion starts
/// it over. For values that never change once known (a verified token's claims, a stored receipt), where a miss only
/// costs the work the cache saves, and an unbounded table would let a flood of distinct keys grow it without end.
public final class BoundedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// The most entries held.
    public let capacity: Int
    private let entries = Mutex<[Key: Value]>([:])

    /// An empty cache of at most `capacity` entries.
    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// The value stored for `key`; setting `nil` removes it.
    public subscript(key: Key) -> Value? {
        get { entries.withLock { $0[key] } }
        set {
            entries.withLock { entries in
                if newValue != nil, entries[key] == nil, entries.count >= capacity {
                    entries.removeAll(keepingCapacity: true)
                }
                entries[key] = newValue
            }
        }
    }

    /// How many entries are held.
    public var count: Int { entries.withLock { $0.count } }
}
