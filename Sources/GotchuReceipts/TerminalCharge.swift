public import Crypto
public import Foundation
import GotchuCore

/// A charge a terminal made itself, signed with its enrolled key: what it offers over GATT when it cannot reach the
/// ledger. The payer reads it, asks the ledger who the terminal's key belongs to, and pays it; the ledger checks the
/// signature and pays each charge (a terminal's key and a nonce) once.
///
/// Its bytes, all integers big-endian:
///
/// | offset | bytes | field |
/// |---|---|---|
/// | 0 | 1 | version, 1 |
/// | 1 | 8 | the terminal key's id: the first 8 bytes of the SHA-256 of its raw public key |
/// | 9 | 16 | a nonce, fresh for each charge |
/// | 25 | 8 | the amount in cents, more than 0 |
/// | 33 | 3 | the currency, three upper-case ASCII letters |
/// | 36 | 8 | when the terminal made it, milliseconds since 1970 |
/// | 44 | 8 | until when it may be paid, milliseconds since 1970, after the former |
/// | 52 | 1 | the length of the reference, 0 to 64 |
/// | 53 | n | the reference, printable UTF-8 |
/// | 53 + n | 64 | the Ed25519 signature of ``signingDomain`` followed by every byte before it |
///
/// At most 181 bytes: one GATT read.
public struct TerminalCharge: Hashable, Sendable {
    /// The terminal key's id, 8 bytes (``keyID(rawPublicKey:)``).
    public var keyID: [UInt8]
    /// The nonce, 16 bytes.
    public var nonce: [UInt8]
    /// The amount in cents.
    public var amountCents: Int64
    /// The currency, such as `USD`.
    public var currency: String
    /// When the terminal made it, on its own clock, in milliseconds since 1970.
    public var createdAtMilliseconds: Int64
    /// Until when it may be paid, in milliseconds since 1970.
    public var expiresAtMilliseconds: Int64
    /// What the merchant wrote on it (an order number), printable, at most 64 bytes.
    public var reference: String
    /// The signature, 64 bytes.
    public var signature: [UInt8]

    /// The format's version.
    public static let version: UInt8 = 1
    /// What the signature covers before the charge's bytes, so no other signed message can pass for a charge.
    public static let signingDomain = Array("gotchu-terminal-charge-v1\u{0}".utf8)
    /// The longest reference, in UTF-8 bytes.
    public static let maximumReferenceBytes = 64
    /// The longest encoding.
    public static let maximumLength = 53 + maximumReferenceBytes + 64

    /// A charge signed with `key`: a fresh nonce, valid from `now` for `lifetime`.
    /// - Throws: ``TerminalChargeError`` for an amount that is not positive, a currency that is not three upper-case
    ///   letters or a reference that is too long or not printable.
    public static func make(
        amountCents: Int64,
        currency: String,
        reference: String = "",
        now: Date,
        lifetime: Duration,
        key: Curve25519.Signing.PrivateKey
    ) throws -> TerminalCharge {
        var generator = SystemRandomNumberGenerator()
        let created = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        let (seconds, attoseconds) = lifetime.components
        var charge = TerminalCharge(
            keyID: Self.keyID(rawPublicKey: key.publicKey.rawRepresentation),
            nonce: (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) },
            amountCents: amountCents,
            currency: currency,
            createdAtMilliseconds: created,
            expiresAtMilliseconds: created + seconds * 1000 + attoseconds / 1_000_000_000_000_000,
            reference: reference,
            signature: []
        )
        try charge.validate()
        charge.signature = Array(try key.signature(for: Self.signingDomain + charge.signedBytes))
        return charge
    }

    /// The id of a terminal key: the first 8 bytes of the SHA-256 of its raw 32-byte public key.
    public static func keyID(rawPublicKey: Data) -> [UInt8] {
        Array(SHA256.hash(data: rawPublicKey).prefix(8))
    }

    /// The key id as the ledger names it, `ed25519-` and 16 hex digits (as ``ReceiptPublicKey/keyID(rawPublicKey:)``).
    public var keyIDText: String { "ed25519-" + Self.hex(keyID) }

    /// The nonce in hex, 32 digits.
    public var nonceText: String { Self.hex(nonce) }

    /// The id of the payment session the ledger opens for this charge: a UUID (version 8) made of the SHA-256 of
    /// the key's id and the nonce. The terminal knows it without the ledger, so a receipt that names it names this
    /// charge, and no two charges share it.
    public var sessionID: String {
        var bytes = Array(SHA256.hash(data: Self.signingDomain + keyID + nonce).prefix(16))
        bytes[6] = bytes[6] & 0x0F | 0x80
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = Self.hex(bytes)
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
            String(hex.dropFirst(range.lowerBound).prefix(range.count))
        }
        return parts.joined(separator: "-")
    }

    /// The code the terminal shows and the payer's question ends with: the session's (``ConfirmationCode``).
    public var confirmationCode: String { ConfirmationCode.of(sessionID: sessionID) }

    /// The charge's bytes, signature included.
    public var encoded: [UInt8] { signedBytes + signature }

    /// Everything the signature covers after the domain.
    private var signedBytes: [UInt8] {
        var bytes: [UInt8] = [Self.version]
        bytes += keyID
        bytes += nonce
        bytes += Self.bigEndian(amountCents)
        bytes += Array(currency.utf8)
        bytes += Self.bigEndian(createdAtMilliseconds)
        bytes += Self.bigEndian(expiresAtMilliseconds)
        let reference = Array(reference.utf8)
        bytes.append(UInt8(reference.count))
        bytes += reference
        return bytes
    }

    /// Reads a charge from its bytes, as they came over the air: every field checked, the signature not (it needs the
    /// terminal's key: ``verify(publicKey:)``).
    /// - Throws: ``TerminalChargeError`` naming what is wrong.
    public init(encoded bytes: some Collection<UInt8>) throws(TerminalChargeError) {
        let bytes = Array(bytes)
        guard bytes.count <= Self.maximumLength else { throw TerminalChargeError("longer than a charge can be") }
        guard bytes.count >= 53 + 64 else { throw TerminalChargeError("shorter than a charge can be") }
        guard bytes[0] == Self.version else { throw TerminalChargeError("version \(bytes[0]) is not known") }
        let referenceLength = Int(bytes[52])
        guard bytes.count == 53 + referenceLength + 64 else {
            throw TerminalChargeError("its length does not match its reference's")
        }
        keyID = Array(bytes[1..<9])
        nonce = Array(bytes[9..<25])
        amountCents = Self.integer(bytes[25..<33])
        guard let currency = String(bytes: bytes[33..<36], encoding: .ascii) else {
            throw TerminalChargeError("the currency is not ASCII")
        }
        self.currency = currency
        createdAtMilliseconds = Self.integer(bytes[36..<44])
        expiresAtMilliseconds = Self.integer(bytes[44..<52])
        guard let reference = String(validating: bytes[53..<(53 + referenceLength)], as: UTF8.self) else {
            throw TerminalChargeError("the reference is not UTF-8")
        }
        self.reference = reference
        signature = Array(bytes[(53 + referenceLength)...])
        try validate()
    }

    private init(
        keyID: [UInt8],
        nonce: [UInt8],
        amountCents: Int64,
        currency: String,
        createdAtMilliseconds: Int64,
        expiresAtMilliseconds: Int64,
        reference: String,
        signature: [UInt8]
    ) {
        self.keyID = keyID
        self.nonce = nonce
        self.amountCents = amountCents
        self.currency = currency
        self.createdAtMilliseconds = createdAtMilliseconds
        self.expiresAtMilliseconds = expiresAtMilliseconds
        self.reference = reference
        self.signature = signature
    }

    /// Checks the fields a charge must have, whoever made it.
    private func validate() throws(TerminalChargeError) {
        guard amountCents > 0 else { throw TerminalChargeError("the amount is not positive") }
        guard currency.utf8.count == 3, currency.utf8.allSatisfy({ (65...90).contains($0) }) else {
            throw TerminalChargeError("the currency is not three upper-case letters")
        }
        guard expiresAtMilliseconds > createdAtMilliseconds else {
            throw TerminalChargeError("it expires before it was made")
        }
        guard reference.utf8.count <= Self.maximumReferenceBytes else {
            throw TerminalChargeError("the reference is longer than \(Self.maximumReferenceBytes) bytes")
        }
        // An order reference, as a session's: shown to the payer, so printable; none is empty.
        if !reference.isEmpty, let problem = OrderReference.problem(in: reference) {
            throw TerminalChargeError("the reference \(problem)")
        }
    }

    /// Whether `publicKey` signed this charge: its id is the charge's, and the signature verifies.
    public func verify(publicKey: Curve25519.Signing.PublicKey) -> Bool {
        Self.keyID(rawPublicKey: publicKey.rawRepresentation) == keyID
            && publicKey.isValidSignature(signature, for: Self.signingDomain + signedBytes)
    }

    private static func bigEndian(_ value: Int64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }

    private static func integer(_ bytes: ArraySlice<UInt8>) -> Int64 {
        bytes.reduce(0) { $0 << 8 | Int64($1) }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// Why bytes are not a charge.
public struct TerminalChargeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong, for a person.
    public var description: String

    /// An error saying `description`.
    public init(_ description: String) { self.description = "not a valid charge: " + description }
}
