package import Crypto
import CryptoExtras
import Foundation
package import GotchuAPI
import GotchuReceipts

/// Turns a session id into its ``GotchuAPI/CheckoutLink`` and back, with no table: the link is the session id's 128
/// bits through AES under a key derived from the server's secret, so every replica that shares the secret reads
/// every link, a link reveals nothing of its session id or EIDs to anyone without the key, and a link nobody made
/// names no session (it decrypts to an id that does not exist, or is not a session id at all).
package struct CheckoutLinks: Sendable {
    private let key: SymmetricKey

    /// What the key is derived for (``TokenAuthority/derivedKey(for:)``).
    package static let keyPurpose = "gotchu checkout link v1"

    package init(key: SymmetricKey) { self.key = key }

    /// The link of session `sid`; `nil` for a text that is no session id.
    package func link(for sid: String) -> CheckoutLink? {
        guard var block = Self.bytes(ofUUID: sid), (try? AES.permute(&block, key: key)) != nil else { return nil }
        return CheckoutLink(rawValue: Base64URL.encode(block))
    }

    /// The session id `link` names, if it names one of the shape this ledger gives (a version 4 UUID).
    package func sid(of link: CheckoutLink) -> String? {
        guard let data = Base64URL.decode(link.rawValue), data.count == 16 else { return nil }
        var block = Array(data)
        guard (try? AES.inversePermute(&block, key: key)) != nil else { return nil }
        // Version 4, RFC 9562 variant: what RandomUUID makes. Anything else was never a link of this ledger.
        guard block[6] >> 4 == 4, block[8] >> 6 == 2 else { return nil }
        let hex = block.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        var id = ""
        for (index, character) in hex.enumerated() {
            if [8, 12, 16, 20].contains(index) { id.append("-") }
            id.append(character)
        }
        return id
    }

    /// The 16 bytes of a UUID written as 36 characters with hyphens; `nil` for anything else.
    private static func bytes(ofUUID text: String) -> [UInt8]? {
        let digits = text.lowercased().filter { $0 != "-" }
        guard text.utf8.count == 36, digits.count == 32 else { return nil }
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}
