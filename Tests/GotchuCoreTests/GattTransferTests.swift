import GotchuCore
import Testing

@Suite(.timeLimit(.minutes(10))) struct GattTransferTests {
    /// A message of `count` bytes that differ from their neighbours.
    private func message(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } }

    @Test(arguments: [23, 24, 100, 185, 247, 517], [0, 1, 17, 18, 19, 20, 500, 1_500, 4_000])
    func everyMessageArrivesWholeInChunksThatFitTheLink(mtu: Int, length: Int) throws {
        let sent = message(length)
        let chunks = GattTransfer.chunks(of: sent, mtu: mtu)
        // Every write fits the link's MTU less the ATT header, and what bluetoothd takes in one write.
        #expect(chunks.allSatisfy { $0.count <= mtu - 3 && $0.count <= 510 })
        var receiver = GattTransfer.Receiver(maximumLength: 4_096)
        var received: [UInt8]?
        for (index, chunk) in chunks.enumerated() {
            received = try receiver.receive(chunk)
            // Nothing before the last chunk.
            #expect((received != nil) == (index == chunks.count - 1))
        }
        #expect(received == sent)
        #expect(!receiver.isReceiving)
    }

    @Test func aMessageLongerThanTakenIsRefusedAtItsFirstChunk() throws {
        var receiver = GattTransfer.Receiver(maximumLength: 100)
        let chunks = GattTransfer.chunks(of: message(101), mtu: 23)
        #expect(throws: GattRefusal.self) { try receiver.receive(chunks[0]) }
        #expect(!receiver.isReceiving)
        // The rest of it is refused too: a chunk without its first.
        #expect(throws: GattRefusal.self) { try receiver.receive(chunks[1]) }
    }

    @Test func chunksOutOfOrderRepeatedOrMissingAreRefusedAndTheMessageDropped() throws {
        let chunks = GattTransfer.chunks(of: message(60), mtu: 23)
        #expect(chunks.count == 4)
        for broken in [[0, 2], [0, 1, 1], [0, 1, 3], [1]] {
            var receiver = GattTransfer.Receiver(maximumLength: 100)
            var refused = false
            for index in broken {
                do {
                    #expect(try receiver.receive(chunks[index]) == nil)
                } catch {
                    refused = true
                    break
                }
            }
            #expect(refused, "\(broken)")
            #expect(!receiver.isReceiving)
            // Sent again from its start, the message arrives.
            var received: [UInt8]?
            for chunk in chunks { received = try receiver.receive(chunk) }
            #expect(received == message(60))
        }
    }

    @Test func aMessageThatEndsShortOrRunsLongIsRefused() throws {
        var receiver = GattTransfer.Receiver(maximumLength: 100)
        // Says 10 bytes, carries 3 and claims to be the last.
        #expect(throws: GattRefusal.self) { try receiver.receive([0xC0, 0, 10, 1, 2, 3]) }
        // Says 2 bytes, carries 3.
        #expect(throws: GattRefusal.self) { try receiver.receive([0xC0, 0, 2, 1, 2, 3]) }
        // Says 3 bytes, carries them, but does not say it is the last.
        #expect(throws: GattRefusal.self) { try receiver.receive([0x80, 0, 3, 1, 2, 3]) }
        // Empty, and a first chunk too short to hold the length.
        #expect(throws: GattRefusal.self) { try receiver.receive([]) }
        #expect(throws: GattRefusal.self) { try receiver.receive([0xC0, 0]) }
        #expect(try receiver.receive([0xC0, 0, 3, 1, 2, 3]) == [1, 2, 3])
    }

    @Test func aNewFirstChunkStartsOver() throws {
        var receiver = GattTransfer.Receiver(maximumLength: 100)
        let chunks = GattTransfer.chunks(of: message(40), mtu: 23)
        #expect(try receiver.receive(chunks[0]) == nil)
        #expect(receiver.isReceiving)
        // A peer that reconnected sends the message again from its start.
        var received: [UInt8]?
        for chunk in chunks { received = try receiver.receive(chunk) }
        #expect(received == message(40))
    }

    @Test func moreThanSixtyFourChunksKeepTheirCount() throws {
        let sent = message(2_000)
        let chunks = GattTransfer.chunks(of: sent, mtu: 23)
        #expect(chunks.count > 64)
        var receiver = GattTransfer.Receiver(maximumLength: 4_096)
        var received: [UInt8]?
        for chunk in chunks { received = try receiver.receive(chunk) }
        #expect(received == sent)
    }
}
