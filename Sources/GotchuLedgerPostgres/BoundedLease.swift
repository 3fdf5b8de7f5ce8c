import PostgresNIO
import Synchronization

/// A connection of a pool for a body, if the pool grants one before a deadline.
///
/// postgres-nio's lease has no deadline of its own, and the cancellation of a waiting lease can be lost: cancelled
/// after it checked its task for cancellation and before it entered the pool's queue, it stays queued, and a pool
/// whose host is gone (the primary's machine died) neither grants it nor fails it. Whoever waited for that lease to
/// end would wait forever: a request, or the probe that looks for the new primary. So the lease runs in a task of its
/// own, which the caller stops waiting for at the deadline; a connection granted after it is given straight back.
enum BoundedLease {
    /// Why no connection came.
    struct Expired: Error {}

    /// Runs `body` with a connection of `client`'s pool if one is granted within `wait`, and returns what it returns.
    /// Once granted, `body` runs to its end whatever the time; the caller's cancellation reaches it.
    /// - Parameter granted: told when the connection is granted, before `body` runs (to count it).
    /// - Throws: ``Expired`` when no connection came within `wait`; the pool's error when it refused the lease.
    static func run<T: Sendable>(
        _ client: PostgresClient,
        within wait: Duration,
        granted: @escaping @Sendable () -> Void = {},
        _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withoutActuallyEscaping(body) { body in
            let handoff = Handoff<T>(body)
            defer { handoff.forget() }
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    handoff.start(continuation)
                    let lease = Task {
                        do {
                            let value = try await client.withConnection { connection -> T? in
                                guard let body = handoff.grant() else { return nil }
                                granted()
                                return try await body(connection)
                            }
                            if let value { handoff.finish(.success(value)) }
                        } catch {
                            handoff.finish(.failure(error))
                        }
                    }
                    let timer = Task {
                        try? await Task.sleep(for: wait)
                        if handoff.expire() { lease.cancel() }
                    }
                    handoff.tasks(lease: lease, timer: timer)
                }
            } onCancel: {
                handoff.cancel()
            }
        }
    }

    /// The passage of one lease from waiting to granted (the body runs) or expired, and back to the caller once.
    private final class Handoff<T: Sendable>: @unchecked Sendable {
        typealias Body = (PostgresConnection) async throws -> T
        private enum Phase { case waiting, granted, done }
        private struct State {
            var phase = Phase.waiting
            var continuation: CheckedContinuation<T, any Error>?
            var lease: Task<Void, Never>?
            var timer: Task<Void, Never>?
            var cancelled = false
        }

        private let state = Mutex(State())
        /// The caller's body, taken by the grant; the caller's frame outlives every use of it (it waits for a granted
        /// body's end), and drops it before it returns.
        private let body: Mutex<Unchecked?>

        /// The body, shared with the lease's task: used by one task at a time, as said above.
        private struct Unchecked: @unchecked Sendable {
            let body: Body
        }

        init(_ body: @escaping Body) {
            self.body = Mutex(Unchecked(body: body))
        }

        func start(_ continuation: CheckedContinuation<T, any Error>) {
            state.withLock { $0.continuation = continuation }
        }

        func tasks(lease: Task<Void, Never>, timer: Task<Void, Never>) {
            let cancelled = state.withLock { state in
                state.lease = lease
                state.timer = timer
                return state.cancelled
            }
            if cancelled { lease.cancel() }
        }

        /// The body, if the connection came before the deadline; `nil` after it.
        func grant() -> Body? {
            let won = state.withLock { state in
                guard state.phase == .waiting else { return false }
                state.phase = .granted
                return true
            }
            guard won else { return nil }
            return body.withLock { $0 }?.body
        }

        /// The deadline passed: `true` if no connection had come (the caller is answered now).
        func expire() -> Bool {
            let continuation = state.withLock { state -> CheckedContinuation<T, any Error>? in
                guard state.phase == .waiting else { return nil }
                state.phase = .done
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(throwing: Expired())
            return continuation != nil
        }

        /// The lease ended: with the body's outcome once granted, or with the pool's refusal while waiting.
        func finish(_ result: Result<T, any Error>) {
            let (continuation, timer) = state.withLock {
                state -> (CheckedContinuation<T, any Error>?, Task<Void, Never>?) in
                guard state.phase != .done else { return (nil, nil) }
                state.phase = .done
                defer { state.continuation = nil }
                return (state.continuation, state.timer)
            }
            timer?.cancel()
            continuation?.resume(with: result)
        }

        /// The caller was cancelled: so is the lease, and with it a body that runs.
        func cancel() {
            let lease = state.withLock { state in
                state.cancelled = true
                return state.lease
            }
            lease?.cancel()
        }

        /// The caller returns: the body is no longer there to run.
        func forget() {
            body.withLock { $0 = nil }
        }
    }
}
