import Dispatch

/// Runs the jobs of the tasks that hold the ledger's writer connection, one at a time, on a thread of their own.
///
/// A write request prefers this executor for its whole turn at the connection (`withTaskExecutorPreference`). The
/// gate is then handed from request to request on one thread: on the cooperative pool, each hand-over queued the next
/// holder behind every other ready job (reads, HTTP, requests still on their way to the gate) and woke a thread for
/// it, and the batch's serial path waited out that queue at every member. Blocking here (the `BEGIN IMMEDIATE` busy
/// wait, the commit's fsync) holds no thread the pool needs.
final class SQLiteWriterExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "gotchu-ledger-writer", qos: .userInitiated)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
