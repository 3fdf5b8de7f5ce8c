/// A message longer than one ATT write, sent as a run of writes to one characteristic and put back together by the
/// peer that serves it.
///
/// Each write is one chunk: a header byte, then the message's next bytes, up to ``writeLength(mtu:)`` in all. The header's top bit marks the
/// first chunk, the next bit the last, and the low six bits count the chunks modulo 64, from 0. The first chunk's
/// message bytes begin with the message's length, two bytes big-endian, so the receiver refuses an oversized message
/// at its first chunk and knows where it ends. A short message is one chunk, first and last.
public enum GattTransfer {
    /// The least MTU of an LE link (23): 19 bytes of message per chunk, 17 in the first.
    public static let minimumMTU = 23
    /// The longest write a server takes, whatever the MTU: an attribute holds at most 512 bytes, and bluetoothd (5.66)
    /// refuses a write of more than 510 ("Invalid Length"), counting the attribute's handle in.
    public static let maximumWriteLength = 510

    /// The longest single write on a link with `mtu`: its MTU less the ATT header, at most ``maximumWriteLength``.
    public static func writeLength(mtu: Int) -> Int {
        min(max(mtu, minimumMTU) - 3, maximumWriteLength)
    }

    static let first: UInt8 = 0x80
    static let last: UInt8 = 0x40
    static let sequenceMask: UInt8 = 0x3F

    /// The writes that carry `message` over a link with `mtu` (at least ``minimumMTU``).
    /// - Precondition: `message` is at most 65,535 bytes.
    public static func chunks(of message: [UInt8], mtu: Int) -> [[UInt8]] {
        precondition(message.count <= Int(UInt16.max), "a GATT transfer carries at most 65535 bytes")
        // One byte of each write is the chunk's header.
        let room = writeLength(mtu: mtu) - 1
        let framed = [UInt8(message.count >> 8), UInt8(message.count & 0xFF)] + message
        var chunks: [[UInt8]] = []
        var start = 0
        while start < framed.count {
            let end = min(start + room, framed.count)
            var header = UInt8(chunks.count % 64)
            if start == 0 { header |= first }
            if end == framed.count { header |= last }
            chunks.append([header] + framed[start..<end])
            start = end
        }
        return chunks
    }

    /// Puts one peer's chunks back together, refusing what does not follow the format.
    public struct Receiver: Sendable {
        /// The longest message taken.
        public let maximumLength: Int
        private var expected: Int?
        private var received: [UInt8] = []
        private var nextSequence: UInt8 = 0

        /// A receiver of messages of at most `maximumLength` bytes.
        public init(maximumLength: Int) {
            self.maximumLength = maximumLength
        }

        /// Whether a message is partly received.
        public var isReceiving: Bool { expected != nil }

        /// Takes the next chunk: the whole message once its last chunk arrives, `nil` before.
        /// - Throws: ``GattRefusal/invalidValue(_:)`` for a chunk out of order, a message longer than
        ///   ``maximumLength`` or than it said, or one that ends short; the message is dropped and the next chunk
        ///   must be a first one.
        public mutating func receive(_ chunk: [UInt8]) throws(GattRefusal) -> [UInt8]? {
            guard let header = chunk.first else { throw drop("an empty write") }
            let sequence = header & GattTransfer.sequenceMask
            var payload = chunk.dropFirst()
            if header & GattTransfer.first != 0 {
                // A first chunk starts over, whatever came before (a peer that reconnected and sends again).
                received = []
                guard sequence == 0, payload.count >= 2 else { throw drop("a malformed first chunk") }
                let length = Int(payload[payload.startIndex]) << 8 | Int(payload[payload.startIndex + 1])
                guard length <= maximumLength else {
                    throw drop("a message of \(length) bytes, more than the \(maximumLength) taken")
                }
                expected = length
                payload = payload.dropFirst(2)
            } else {
                guard expected != nil else { throw drop("a chunk without its first") }
                guard sequence == nextSequence else { throw drop("a chunk out of order") }
            }
            guard let length = expected, received.count + payload.count <= length else {
                throw drop("more bytes than the message said")
            }
            received += payload
            nextSequence = (sequence + 1) & GattTransfer.sequenceMask
            let isLast = header & GattTransfer.last != 0
            guard isLast == (received.count == length) else {
                throw drop(isLast ? "a message that ends short" : "bytes after the message's end")
            }
            guard isLast else { return nil }
            defer { reset() }
            return received
        }

        private mutating func reset() {
            expected = nil
            received = []
            nextSequence = 0
        }

        private mutating func drop(_ reason: String) -> GattRefusal {
            reset()
            return .invalidValue(reason)
        }
    }
}
