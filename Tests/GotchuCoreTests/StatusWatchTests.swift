import GotchuCore
import Testing

@Suite("How a driver watches a session's status", .timeLimit(.minutes(10)))
struct StatusWatchTests {
    @Test("On the stream: waits for changes, re-reads after a quiet spell")
    func live() {
        var watch = StatusWatch(configuration: .init(safetyInterval: .seconds(30)))
        #expect(watch.first == .awaitChange(timeout: .seconds(30)))
        #expect(watch.next(after: .changed) == .awaitChange(timeout: .seconds(30)))
        #expect(watch.next(after: .timedOut) == .read(after: .zero))
        #expect(watch.next(after: .read) == .awaitChange(timeout: .seconds(30)))
        #expect(!watch.polling)
    }

    @Test("A broken stream: re-read after a backoff that doubles up to its maximum; a working stream forgives")
    func backoff() {
        var watch = StatusWatch(configuration: .init(backoff: .milliseconds(250), maximumBackoff: .seconds(1)))
        #expect(watch.next(after: .streamFailed) == .read(after: .milliseconds(250)))
        #expect(watch.next(after: .read) == .awaitChange(timeout: .seconds(30)))
        #expect(watch.next(after: .streamFailed) == .read(after: .milliseconds(500)))
        #expect(watch.next(after: .readFailed) == .read(after: .seconds(1)))
        #expect(watch.next(after: .streamFailed) == .read(after: .seconds(1)))
        _ = watch.next(after: .read)
        #expect(watch.next(after: .changed) == .awaitChange(timeout: .seconds(30)))
        #expect(watch.failures == 0)
        #expect(watch.next(after: .streamFailed) == .read(after: .milliseconds(250)))
    }

    @Test("A server without event streams is polled from then on")
    func fallback() {
        var watch = StatusWatch(configuration: .init(pollInterval: .milliseconds(200)))
        #expect(watch.next(after: .streamUnsupported) == .read(after: .zero))
        #expect(watch.polling)
        #expect(watch.next(after: .read) == .read(after: .milliseconds(200)))
        #expect(watch.next(after: .readFailed) == .read(after: .milliseconds(200)))
    }

    @Test("Live status off: polling from the start")
    func pollingOnly() {
        var watch = StatusWatch(configuration: .init(live: false, pollInterval: .milliseconds(200)))
        #expect(watch.first == .read(after: .zero))
        #expect(watch.next(after: .read) == .read(after: .milliseconds(200)))
    }
}
