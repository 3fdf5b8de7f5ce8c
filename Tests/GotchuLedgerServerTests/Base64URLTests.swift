import Foundation
import GotchuAPI
import GotchuReceipts
import Testing

@Suite(.timeLimit(.minutes(10))) struct Base64URLTests {
    /// Foundation's base64 with the URL alphabet and no padding, the definition the encoder must match.
    static func reference(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    @Test func matchesFoundationsBase64WithTheURLAlphabetAndNoPadding() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            for _ in 0..<5 {
                let bytes = (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
                let encoded = Base64URL.encode(bytes)
                #expect(encoded == Self.reference(bytes), "\(bytes)")
                #expect(Base64URL.decode(encoded) == Data(bytes))
            }
        }
    }

    @Test func usesEveryCharacterOfTheAlphabet() {
        // 0x00, 0x10, 0x83, …: each group of three bytes spells four consecutive values of the alphabet.
        let bytes = stride(from: 0, to: 64, by: 4).flatMap { value -> [UInt8] in
            let group = UInt32(value) << 18 | UInt32(value + 1) << 12 | UInt32(value + 2) << 6 | UInt32(value + 3)
            return [UInt8(group >> 16), UInt8(group >> 8 & 0xFF), UInt8(group & 0xFF)]
        }
        #expect(Base64URL.encode(bytes) == "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.encode([]) == "")
    }
}
