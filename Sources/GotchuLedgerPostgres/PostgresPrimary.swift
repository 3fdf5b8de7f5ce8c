import Foundation
import GotchuCore
package import Logging
package import PostgresNIO
import ServiceLifecycle
import Synchronization

/// The writable primary among a URL's hosts, and a connection pool to each host.
///
/// A ledger on a primary with a standby names both (`postgres://gotchu@db1,db2/gotchu`). When the primary's machine
/// dies and the standby is promoted (by Patroni, or by a person with `pg_ctl promote`), the hosts do not change; which
/// of them takes writes does. So every host has a pool of its own, and the ledger writes through the pool of the one
/// found to be the primary (`SELECT pg_is_in_recovery()` answers false). A request whose connection fails, that finds
/// its host read-only (a standby, SQLSTATE 25006), or that gets no connection in time, makes the ledger look again:
/// every host is asked in the URL's order, each within a second, until one answers as the primary. Requests meanwhile
/// are refused as the database being unavailable (503), never retried here: whether a refused write committed is for
/// its idempotency key to settle when the client sends it again.
///
/// With one host there is nothing to choose: its pool is used as it is, and nothing is asked.
package final class PostgresPrimary: Service, Sendable {
    /// The hosts, in the URL's order.
    package let hosts: [PostgresURL.Host]
    /// One pool per host, in the same order.
    package let clients: [PostgresClient]
    private let logger: Logger
    /// The host writes go to now, and how many times the primary was looked for.
    private let state = Mutex<(current: Int, generation: Int, looking: Bool)>((0, 0, false))
    private let wakes: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    /// The pools of `url`'s hosts, configured by `configure` (the pool's size), each logging to `logger`.
    package init(
        url: PostgresURL,
        logger: Logger,
        configure: (inout PostgresClient.Configuration) -> Void = { _ in }
    ) {
        hosts = url.hosts
        clients = url.hosts.map { host in
            var configuration = url.configuration(for: host)
            configure(&configuration)
            return PostgresClient(configuration: configuration, backgroundLogger: logger)
        }
        self.logger = logger
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// One pool that the caller runs (``run()`` then runs nothing).
    package init(client: PostgresClient, logger: Logger) {
        hosts = []
        clients = [client]
        self.logger = logger
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        wake.finish()
    }

    /// The host writes go to now, by its index in ``clients``, and its pool.
    package var current: (index: Int, client: PostgresClient) {
        let index = state.withLock { $0.current }
        return (index, clients[index])
    }

    /// A request on host `index` failed as one on a lost or demoted primary does: unless another host was chosen
    /// meanwhile, the primary is looked for again.
    package func suspect(_ index: Int) {
        guard clients.count > 1 else { return }
        let ask = state.withLock { state in
            guard state.current == index, !state.looking else { return false }
            state.looking = true
            return true
        }
        if ask { wake.yield() }
    }

    /// Runs every host's pool and, with several hosts, looks for the primary at the start and whenever a request
    /// suspects it; ends at graceful shutdown or cancellation.
    package func run() async throws {
        // A pool given by the caller is run by the caller.
        guard !hosts.isEmpty else { return }
        let clients = self.clients
        await withDiscardingTaskGroup { group in
            for client in clients { group.addTask { await client.run() } }
            guard clients.count > 1 else { return }
            group.addTask {
                await cancelWhenGracefulShutdown {
                    await self.findPrimary()
                    for await _ in self.wakes {
                        await self.findPrimary()
                    }
                }
            }
        }
    }

    /// Asks every host in turn, again and again, until one answers as the primary; it takes the writes from then on.
    private func findPrimary() async {
        while !Task.isCancelled {
            for (index, client) in clients.enumerated() where await isPrimary(client, within: .seconds(1)) {
                let (previous, first) = state.withLock { state in
                    let before = (state.current, state.generation == 0)
                    state.current = index
                    state.generation += 1
                    state.looking = false
                    return before
                }
                if first || previous != index {
                    logger.notice(
                        "PostgreSQL primary",
                        metadata: ["host": "\(hosts[index])", "previous": "\(hosts[previous])"]
                    )
                }
                return
            }
            logger.warning(
                "no PostgreSQL host answers as a writable primary; asking again",
                metadata: ["hosts": "\(hosts.map(\.description).joined(separator: ","))"]
            )
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    /// Whether `client`'s host answers, within `wait`, that it is not in recovery: a primary.
    private func isPrimary(_ client: PostgresClient, within wait: Duration) async -> Bool {
        let logger = self.logger
        let answer = await Self.ask(client, within: wait) { connection -> Bool in
            for try await inRecovery in try await connection.query("SELECT pg_is_in_recovery()", logger: logger)
                .decode(Bool.self)
            {
                return !inRecovery
            }
            return false
        }
        return (try? answer?.get()) ?? false
    }

    /// What `body` reads with a connection of `client`'s pool, or its failure; `nil` when no answer came within
    /// `wait` (a host that does not answer must not hold up the others, nor a lease its pool never answers).
    static func ask<T: Sendable>(
        _ client: PostgresClient,
        within wait: Duration,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async -> Result<T, any Error>? {
        let start = ContinuousClock.now
        do {
            let answer = try await BoundedLease.run(client, within: wait) { connection in
                // What is left of `wait` bounds the answer too: a host can take a connection and then stall. Closing
                // the connection fails the query at once, where a cancellation could wait for the network.
                let deadline = Task {
                    try await Task.sleep(until: start + wait)
                    try? await connection.close()
                }
                defer { deadline.cancel() }
                return try await body(connection)
            }
            return .success(answer)
        } catch is BoundedLease.Expired {
            return nil
        } catch {
            return .failure(error)
        }
    }
}

extension PostgresPrimary {
    /// What one host says of itself and of its replication, for `gotchu ledger check-replication`.
    package struct HostStatus: Sendable {
        /// A standby that streams from a primary, as the primary sees it.
        package struct Standby: Sendable {
            package var name: String
            package var state: String
            /// `sync`, `quorum`, `potential` or `async`.
            package var syncState: String
            /// How far its replay is behind, in seconds.
            package var replayLag: Double
        }

        package var host: PostgresURL.Host
        /// Why the host did not answer; `nil` when it did.
        package var unreachable: String?
        /// Whether it takes writes (not in recovery).
        package var isPrimary = false
        /// `synchronous_standby_names` and `synchronous_commit` as it runs with them.
        package var synchronousStandbyNames = ""
        package var synchronousCommit = ""
        /// A primary's standbys.
        package var standbys: [Standby] = []
        /// A standby's WAL receiver: `streaming`, or what it is doing instead; `nil` on a primary.
        package var receiver: String?
    }

    /// Asks every host, within `wait` each, what it is and how it replicates.
    package func status(within wait: Duration = .seconds(3)) async -> [HostStatus] {
        var statuses: [HostStatus] = []
        for (index, client) in clients.enumerated() {
            let host = hosts.isEmpty ? PostgresURL.Host(name: "?", port: 0) : hosts[index]
            statuses.append(await Self.status(of: client, host: host, within: wait, logger: logger))
        }
        return statuses
    }

    private static func status(
        of client: PostgresClient,
        host: PostgresURL.Host,
        within wait: Duration,
        logger: Logger
    ) async -> HostStatus {
        let answer = await ask(client, within: wait) { connection -> HostStatus in
            var status = HostStatus(host: host)
            let settings = try await connection.query(
                """
                SELECT NOT pg_is_in_recovery(), current_setting('synchronous_standby_names'),
                current_setting('synchronous_commit')
                """,
                logger: logger
            )
            for try await (primary, names, commit) in settings.decode((Bool, String, String).self) {
                status.isPrimary = primary
                status.synchronousStandbyNames = names
                status.synchronousCommit = commit
            }
            if status.isPrimary {
                let standbys = try await connection.query(
                    """
                    SELECT application_name, coalesce(state, ''), coalesce(sync_state, ''),
                    coalesce(extract(epoch FROM replay_lag), 0)::float8 FROM pg_stat_replication
                    ORDER BY application_name
                    """,
                    logger: logger
                )
                for try await (name, state, sync, lag) in standbys.decode(
                    (String, String, String, Double).self
                ) {
                    status.standbys.append(.init(name: name, state: state, syncState: sync, replayLag: lag))
                }
            } else {
                let receiver = try await connection.query(
                    "SELECT coalesce((SELECT status FROM pg_stat_wal_receiver LIMIT 1), 'not receiving')",
                    logger: logger
                )
                for try await state in receiver.decode(String.self) { status.receiver = state }
            }
            return status
        }
        switch answer {
        case .success(let status): return status
        case .failure(let error): return HostStatus(host: host, unreachable: "\(error)")
        case nil: return HostStatus(host: host, unreachable: "no answer within \(wait.seconds) s")
        }
    }
}
