import Foundation
import GotchuAPI
import Hummingbird
import NIOCore
import ServiceLifecycle

/// One browser's `/events` response: a server-sent event per status, and keep-alive comments in between.
///
/// It ends when the kiosk's status stream ends, when a write fails (the browser is gone; noticed at the latest on
/// the next keep-alive), or on graceful shutdown. Its subscription to the kiosk ends with it.
struct KioskEventStream: Sendable {
    let source: any KioskStatusSource
    let keepAliveInterval: Duration

    private enum Event: Sendable {
        case status(KioskStatus)
        case keepAlive
    }

    /// The browser's reconnection delay after a dropped stream, in milliseconds (browsers wait about 3 s otherwise).
    static let retryMilliseconds = 1000

    func run(_ writer: inout any ResponseBodyWriter) async throws {
        // Only the newest statuses matter to a browser that falls behind; each is complete on its own.
        let (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(8))
        let source = self.source
        let keepAliveInterval = self.keepAliveInterval
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await status in await source.statusUpdates() { continuation.yield(.status(status)) }
                continuation.finish()
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: keepAliveInterval)
                    continuation.yield(.keepAlive)
                }
            }
            // Leaving the scope (a failed write included) cancels both tasks, which ends the subscription.
            defer { group.cancelAll() }
            try await withGracefulShutdownHandler {
                try await writer.write(ByteBuffer(string: "retry: \(Self.retryMilliseconds)\n\n"))
                for await event in events {
                    switch event {
                    case .status(let status): try await writer.write(try Self.data(status))
                    case .keepAlive: try await writer.write(ByteBuffer(string: ": keep-alive\n\n"))
                    }
                }
            } onGracefulShutdown: {
                continuation.finish()
            }
        }
        try await writer.finish(nil)
    }

    /// One event: compact JSON holds no newline, so it fits a single `data:` line.
    static func data(_ status: KioskStatus) throws -> ByteBuffer {
        var buffer = ByteBuffer(string: "data: ")
        buffer.writeBytes(try APIJSON.encoder().encode(Displayed(status: status.forDisplay)))
        buffer.writeString("\n\n")
        return buffer
    }

    /// A status as the stream sends it: the status's own JSON, and under `display` the texts the page shows for it
    /// (``KioskDisplayPage/View``), so the page's script shows what the kiosk computed instead of computing it again.
    private struct Displayed: Encodable {
        let status: KioskStatus

        enum Key: String, CodingKey { case display }

        func encode(to encoder: any Encoder) throws {
            try status.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(KioskDisplayPage.View(status), forKey: .display)
        }
    }
}
