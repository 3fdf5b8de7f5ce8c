import Hummingbird
import Logging
import Testing

/// Runs a Hummingbird application of `router` on a free loopback port for the length of `body`, which gets its base
/// URL (`http://127.0.0.1:PORT`): a stand-in server for what a client must cope with.
func withLoopbackApplication<Result: Sendable>(
    _ router: Router<BasicRequestContext>,
    _ body: @Sendable (String) async throws -> Result
) async throws -> Result {
    let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
    let application = Application(
        router: router,
        configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) },
        logger: Logger(label: "loopback") { _ in SwiftLogNoOpLogHandler() }
    )
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await application.run() }
        defer { group.cancelAll() }
        var iterator = ports.makeAsyncIterator()
        let port = try #require(await iterator.next())
        return try await body("http://127.0.0.1:\(port)")
    }
}
