import Foundation
import GotchuDBus
import GotchuTesting
import Testing

@Suite("DBusPolicies/io.gotchu.Kiosk1.conf", requiresDBusDaemon, .timeLimit(.minutes(10)))
struct PolicyTests {
    static let policy = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("DBusPolicies/io.gotchu.Kiosk1.conf")

    @Test("dbus-daemon accepts the policy, and it denies the kiosk's name to other users")
    func policyLoadsAndDenies() async throws {
        // The test runs as a user that is neither `gotchu` nor in `gotchu-pos`.
        let name = String(cString: getpwuid(getuid()).pointee.pw_name)
        try #require(name != "gotchu", "run this test as another user than gotchu")
        try await PrivateBus.with(includes: [Self.policy]) { bus in
            try await DBusConnection.withConnection(to: .address(bus.address)) { connection in
                do {
                    try await connection.requestName("io.gotchu.Kiosk1")
                    Issue.record("\(name) was allowed to own io.gotchu.Kiosk1")
                } catch let error as DBusError {
                    #expect(error.name == .accessDenied)
                }
                // Other names stay governed by the rest of the configuration.
                try await connection.requestName("io.gotchu.Other")
            }
        }
    }

    @Test("a configuration dbus-daemon cannot parse fails to start (so the test above can fail)")
    func brokenPolicyIsRejected() async throws {
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-broken-\(getpid()).conf")
        try "<busconfig><policy context=\"default\"><allow own=".write(to: broken, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: broken) }
        await #expect(throws: (any Error).self) {
            try await PrivateBus.with(includes: [broken]) { _ in }
        }
    }
}
