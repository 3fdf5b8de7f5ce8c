import Foundation
import GotchuCore
import GotchuSimulatedRadio
import Testing

@Suite("The simulated air shared through a directory", .timeLimit(.minutes(10)))
struct SharedAirRadioTests {
    @Test("A scanner hears an advertiser of another radio on the same directory, and stops hearing it after its scope")
    func hearsAndForgets() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("air-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let terminal = try await SharedAirRadio(
            directory: directory,
            peer: SimulatedPeer(name: "terminal", at: Position(x: 0, y: 0)),
            seed: 1
        )
        let phone = try await SharedAirRadio(
            directory: directory,
            peer: SimulatedPeer(name: "phone", at: Position(x: 0.2, y: 0)),
            seed: 2
        )
        // Garbage in the directory is skipped.
        try Data("not json".utf8).write(to: directory.appendingPathComponent("junk.json"))
        let eid = EID(rawValue: "a1b2c3d4e5")!
        let sightings = try await phone.scan(ScanFilter())
        let heard = try await terminal.withAdvertisement(Advertisement(eid: eid)) { _ in
            var iterator = sightings.makeAsyncIterator()
            return try await iterator.next()
        }
        #expect(heard?.eid == eid)
        #expect(heard?.txPower == 0)
        #expect((heard?.rssi ?? -127) > -70)
        // Only the advertiser's file: the junk is left to the sweep of files a minute stale, which a slow run reaches.
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(files.allSatisfy { $0 == "junk.json" }, "the advertiser's file is gone with its scope")
    }
}
