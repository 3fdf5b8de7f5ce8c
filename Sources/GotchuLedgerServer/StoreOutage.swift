import GotchuLedger
import Logging
import Synchronization

/// Whether the store is in an outage now (out of reach, or its disk full), so that an outage is logged once when it
/// begins and once when it ends, not on every request refused meanwhile: an operator woken at night reads two lines,
/// not ten thousand.
final class StoreOutage: Sendable {
    private let current = Mutex<LedgerError?>(nil)

    /// The kinds of refusal that are the store's condition, not the request's.
    static func isOutage(_ error: LedgerError) -> Bool {
        error.kind == .databaseUnavailable || error.kind == .storageFull
    }

    /// A request was refused because of `error`: logged at error level if it begins an outage (or changes its kind).
    func failed(_ error: LedgerError, logger: Logger) {
        let began = current.withLock { current in
            defer { current = error }
            return current?.kind != error.kind
        }
        if began {
            logger.error(
                "ledger store unavailable; requests are refused until it recovers",
                metadata: ["reason": "\(error.kind.rawValue)", "detail": "\(error.detail)"]
            )
        }
    }

    /// The store took a write: an outage in progress, if any, is over.
    func recovered(logger: Logger) {
        guard
            let ended = current.withLock({ current in
                defer { current = nil }
                return current
            })
        else { return }
        logger.notice("ledger store writable again", metadata: ["reason": "\(ended.kind.rawValue)"])
    }
}

/// The result of `body`, or `nil` if it has not finished within `limit`; `body` is then cancelled and left to end on
/// its own, so the caller answers on time even when what it waits for cannot be interrupted (a SQLite commit waiting
/// for its fsync).
func withDeadline<T: Sendable>(
    _ limit: Duration,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T? {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T?, any Error>) in
        let race = DeadlineRace(continuation)
        let work = Task {
            do {
                race.settle(.success(try await body()))
            } catch {
                race.settle(.failure(error))
            }
        }
        Task {
            try? await Task.sleep(for: limit)
            if race.settle(.success(nil)) { work.cancel() }
        }
    }
}

/// The caller of ``withDeadline(_:_:)``, resumed once: by the body or by the timer, whichever finishes first.
private final class DeadlineRace<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<T?, any Error>?>

    init(_ continuation: CheckedContinuation<T?, any Error>) { self.continuation = Mutex(continuation) }

    /// Resumes the caller with `result` if nothing did before; returns whether this did.
    @discardableResult
    func settle(_ result: Result<T?, any Error>) -> Bool {
        guard let continuation = continuation.withLock({ $0.take() }) else { return false }
        continuation.resume(with: result)
        return true
    }
}
