import Foundation
import GotchuCore
import Testing

@Suite(.timeLimit(.minutes(10))) struct RandomUUIDTests {
    @Test func isALowercaseVersion4UUIDThatFoundationReads() throws {
        for _ in 0..<1000 {
            let text = RandomUUID.make()
            let uuid = try #require(UUID(uuidString: text))
            #expect(uuid.uuidString.lowercased() == text)
            #expect(uuid.uuid.6 >> 4 == 4, "version")
            #expect(uuid.uuid.8 >> 6 == 0b10, "variant")
        }
    }

    /// Every bit but the six fixed ones comes from the generator, in order: the all-ones and all-zeros draws show
    /// which bits are fixed, a counting generator shows the order.
    @Test func takesItsBitsFromTheGenerator() {
        struct Constant: RandomNumberGenerator {
            var value: UInt64
            mutating func next() -> UInt64 { value }
        }
        struct Counting: RandomNumberGenerator {
            var value: UInt64 = 0x0123_4567_89ab_cdef
            mutating func next() -> UInt64 {
                defer { value = ~value }
                return value
            }
        }
        var ones = Constant(value: .max)
        #expect(RandomUUID.make(using: &ones) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
        var zeros = Constant(value: 0)
        #expect(RandomUUID.make(using: &zeros) == "00000000-0000-4000-8000-000000000000")
        var counting = Counting()
        #expect(RandomUUID.make(using: &counting) == "01234567-89ab-4def-bedc-ba9876543210")
    }

    @Test func drawsDistinctIDs() {
        let ids = (0..<10_000).map { _ in RandomUUID.make() }
        #expect(Set(ids).count == ids.count)
    }
}
