import NIOCore

/// Runs a task's jobs on one event loop.
///
/// A transaction prefers the event loop of the connection it runs on (`withTaskExecutorPreference`). Each statement
/// is then written from the loop's own thread, and the task resumes on that thread when the answer arrives; on the
/// cooperative pool, every statement instead hopped from the task's thread to the loop and back, and those hand-offs
/// cost a fifth of a payment's time. The engine's work between statements is short (hashing, a signature); password
/// hashing leaves the thread (``Passwords``).
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
