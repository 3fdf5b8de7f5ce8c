public import Crypto
public import Foundation
public import GotchuCore

/// A signed receipt: the ledger's statement that money moved, which anyone holding the ledger's public receipt keys
/// can check without trusting the HTTP answer it came in.
///
/// The signature is Ed25519 over ``canonicalBytes``: every field but the signature, in a fixed order, each as a
/// 4-byte big-endian length followed by its UTF-8 bytes (numbers in decimal ASCII). docs/api.md ("Signed receipts") spells the format out
/// for other implementations. This type is the one place that format is written: the server signs with it, the
/// clients and `gotchu receipt verify` check with it.
public struct Receipt: Codable, Hashable, Sendable {
    /// The format's version: the first field of the canonical bytes names it. A receipt that carries shares or a
    /// tip is of ``splitFormat``.
    public static let format = "gotchu-receipt-v1"
    /// The format of a payment receipt with shares and a tip: the fields of ``format`` with the tip, the session's
    /// share count and the shares paid after the amount.
    public static let splitFormat = "gotchu-receipt-v2"

    /// The receipt's id (a UUID).
    public var id: String
    /// What the receipt records.
    public var kind: ReceiptKind
    /// The payment session it belongs to.
    public var sessionID: String
    /// The amount that moved, in cents (always positive); of a payment with a tip, the amount paid for its shares,
    /// without the tip.
    public var amountCents: Cents
    /// The tip paid to the payee on top of ``amountCents`` (its transfer moved both), on payment receipts of the
    /// split format; `nil` on others.
    public var tipCents: Cents?
    /// Into how many shares the session is split, on payment receipts of the split format (1: one payer, with a
    /// tip); `nil` on others.
    public var shares: Int?
    /// The numbers of the shares this payment paid (1 is the first), on payment receipts of the split format.
    public var shareNumbers: [Int]?
    /// ISO 4217 code of the amount's currency.
    public var currency: String
    /// The payee's user id.
    public var payeeID: String
    /// An opaque reference to the payer (``payerReference(receiptID:payerID:)``): the payer can recognise it, no
    /// one else learns the payer's id from it, and no two receipts share it.
    public var payerReference: String
    /// The ledger entries of the transfer, debit first.
    public var entryIDs: [String]
    /// When the ledger wrote the transfer, in milliseconds since 1970 on the ledger's clock.
    public var issuedAtMilliseconds: Int64
    /// The id (`kid`) of the key that signed it.
    public var keyID: String
    /// The Ed25519 signature over ``canonicalBytes``, base64url without padding.
    public var signature: String

    /// A receipt (signed, or with an empty signature before ``ReceiptSigner/sign(_:)``); with `split`, of a payment
    /// of shares of a split session or with a tip (``splitFormat``).
    public init(
        id: String,
        kind: ReceiptKind,
        sessionID: String,
        amountCents: Cents,
        currency: String,
        payeeID: String,
        payerReference: String,
        entryIDs: [String],
        issuedAtMilliseconds: Int64,
        keyID: String,
        signature: String = "",
        split: (tipCents: Cents, shares: Int, shareNumbers: [Int])? = nil
    ) {
        self.id = id
        self.kind = kind
        self.sessionID = sessionID
        self.amountCents = amountCents
        self.tipCents = split?.tipCents
        self.shares = split?.shares
        self.shareNumbers = split?.shareNumbers
        self.currency = currency
        self.payeeID = payeeID
        self.payerReference = payerReference
        self.entryIDs = entryIDs
        self.issuedAtMilliseconds = issuedAtMilliseconds
        self.keyID = keyID
        self.signature = signature
    }

    enum CodingKeys: String, CodingKey {
        case id, kind, currency, signature, shares
        case sessionID = "sid"
        case tipCents = "tip_cents"
        case shareNumbers = "share_numbers"
        case amountCents = "amount_cents"
        case payeeID = "payee_id"
        case payerReference = "payer_ref"
        case entryIDs = "entry_ids"
        case issuedAtMilliseconds = "issued_at_ms"
        case keyID = "kid"
    }

    /// Any key, to find the ones a receipt does not have.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Decodes a receipt, refusing keys it does not have: a field the signature does not cover is not part of what
    /// the ledger said, and a reader that took it for one would be misled.
    public init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: AnyKey.self).allKeys
        for key in keys where CodingKeys(stringValue: key.stringValue) == nil {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: decoder.codingPath + [key],
                    debugDescription: "a receipt has no field \(DisplayText.quoted(key.stringValue))"
                )
            )
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.id = try container.decode(String.self, forKey: .id)
        self.kind = try container.decode(ReceiptKind.self, forKey: .kind)
        self.sessionID = try container.decode(String.self, forKey: .sessionID)
        self.amountCents = try container.decodeLenientCents(forKey: .amountCents)
        self.tipCents = container.contains(.tipCents) ? try container.decodeLenientCents(forKey: .tipCents) : nil
        self.shares = try container.decodeIfPresent(Int.self, forKey: .shares)
        self.shareNumbers = try container.decodeIfPresent([Int].self, forKey: .shareNumbers)
        self.currency = try container.decode(String.self, forKey: .currency)
        self.payeeID = try container.decode(String.self, forKey: .payeeID)
        self.payerReference = try container.decode(String.self, forKey: .payerReference)
        self.entryIDs = try container.decode([String].self, forKey: .entryIDs)
        self.issuedAtMilliseconds = try container.decodeLenientCents(forKey: .issuedAtMilliseconds)
        self.keyID = try container.decode(String.self, forKey: .keyID)
        self.signature = try container.decode(String.self, forKey: .signature)
    }

    /// The bytes the signature covers: the format name, then id, kind, session id, amount, (of the split format:
    /// the tip, the share count, the number of shares paid and each share's number,) currency, payee id, payer
    /// reference, the number of entry ids and each entry id, the time and the key id; each field as a 4-byte
    /// big-endian byte count and its UTF-8 bytes.
    public var canonicalBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(512)
        var split: [String] = []
        if isSplitFormat {
            let numbers = shareNumbers ?? []
            split = [String(tipCents ?? 0), String(shares ?? 0), String(numbers.count)] + numbers.map(String.init)
        }
        let fields =
            [isSplitFormat ? Self.splitFormat : Self.format, id, kind.rawValue, sessionID, String(amountCents)]
            + split + [currency, payeeID, payerReference, String(entryIDs.count)] + entryIDs
            + [String(issuedAtMilliseconds), keyID]
        for field in fields { CanonicalField.append(field, to: &bytes) }
        return bytes
    }

    /// Whether the receipt is of ``splitFormat``: it carries a tip, a share count or shares paid.
    public var isSplitFormat: Bool { tipCents != nil || shares != nil || shareNumbers != nil }

    /// The payer reference of receipt `receiptID` paid by `payerID`: base64url (no padding) of
    /// SHA-256 over the canonical fields `gotchu-payer-ref-v1`, the receipt id and the payer id. A payer recomputes
    /// it from its own id; user ids are random UUIDs, so no one else can tell whose it is, and the receipt id makes
    /// every payer's references unlinkable.
    public static func payerReference(receiptID: String, payerID: String) -> String {
        var bytes: [UInt8] = []
        for field in ["gotchu-payer-ref-v1", receiptID, payerID] { CanonicalField.append(field, to: &bytes) }
        return Base64URL.encode(Data(SHA256.hash(data: bytes)))
    }

    /// The receipt as JSON exactly as the ledger writes it, stores it and answers it (compact, keys sorted, amounts
    /// as integers, the same bytes inside an API answer): its one spelling, which ``init(strictJSON:)`` requires.
    public var canonicalJSON: Data {
        // Strings, integers and an array of strings always encode.
        (try? ReceiptJSON.encoder().encode(self)) ?? Data()
    }

    /// A receipt read from JSON as a ledger wrote it (``canonicalJSON``; amounts may also be strings of digits), with
    /// none of the checks of ``init(strictJSON:)``: for text that comes from the ledger's own store.
    public init(json: Data) throws(ReceiptError) {
        do {
            self = try ReceiptJSON.decoder().decode(Receipt.self, from: json)
        } catch let DecodingError.dataCorrupted(context) {
            throw ReceiptError("not a receipt: \(context.debugDescription)")
        } catch {
            throw ReceiptError("not a receipt (a JSON object with id, kind, sid, …, kid and signature): \(error)")
        }
    }

    /// A receipt read strictly from `json`, the text someone presented: the whole text must be JSON in which no object
    /// names a key twice, the receipt must have no key it does not define, and the text (but for whitespace around
    /// it) must be ``canonicalJSON`` byte for byte. Then every reader, in any language, takes the same fields from it
    /// as this one, and the fields the signature covers are the ones presented; a text that other parsers could read
    /// differently (`"amount_cents":700,"amount_cents":999999`) is refused before its signature is looked at.
    public init(strictJSON json: some Collection<UInt8>) throws(ReceiptError) {
        let bytes = try Self.strictBytes(json)
        let start = bytes.firstIndex { !StrictJSON.isWhitespace($0) } ?? bytes.endIndex
        let end = (bytes.lastIndex { !StrictJSON.isWhitespace($0) }).map { $0 + 1 } ?? start
        let text = bytes[start..<end]
        let receipt = try Receipt(json: Data(text))
        guard text.elementsEqual(receipt.canonicalJSON) else {
            throw ReceiptError(
                "the receipt is not spelled as the ledger wrote it (compact JSON, keys sorted, amounts as integers), "
                    + "so its text may not say what its signature covers"
            )
        }
        self = receipt
    }

    /// A receipt as someone saved it: any JSON spelling of a receipt's fields, the signature covering the fields and
    /// not the text, so a receipt re-saved by any JSON library (spaces, indentation, keys in another order, escapes,
    /// a database's JSON column) reads as the same receipt. What could make two readers take different fields from
    /// it is still refused: a key named twice in any object, a key a receipt does not have, and a number that is not
    /// written as an integer (every number in a receipt is one; `700.0` and `"700"` are refused).
    public init(savedJSON json: some Collection<UInt8>) throws(ReceiptError) {
        let bytes = try Self.strictBytes(json)
        if Self.hasNonIntegerNumber(bytes) {
            throw ReceiptError("the receipt writes a number with a fraction or an exponent; its numbers are integers")
        }
        let receipt = try Receipt(json: Data(bytes))
        // The fields as given, against the fields the receipt has: a string where an integer belongs differs.
        let given = try? JSONSerialization.jsonObject(with: Data(bytes)) as? NSDictionary
        let expected = try? JSONSerialization.jsonObject(with: receipt.canonicalJSON) as? NSDictionary
        guard let given, let expected, given.isEqual(expected) else {
            throw ReceiptError("the receipt writes a field as another type than a receipt has (amounts are integers)")
        }
        self = receipt
    }

    /// `json` as bytes, once it is within ``maximumJSONSize`` and strict JSON (no object names a key twice): what
    /// every reading of a presented receipt starts with.
    private static func strictBytes(_ json: some Collection<UInt8>) throws(ReceiptError) -> [UInt8] {
        let bytes = Array(json)
        guard bytes.count <= maximumJSONSize else {
            throw ReceiptError("the receipt is larger than \(maximumJSONSize) bytes")
        }
        do {
            _ = try StrictJSON.check(bytes, maximumDepth: 4)
        } catch {
            throw ReceiptError("the receipt is not strict JSON: \(error.description)")
        }
        return bytes
    }

    /// Whether a number outside the strings of strict JSON `bytes` has a fraction or an exponent (outside strings,
    /// `.` only appears in such numbers, and `e` or `E` after a digit only in exponents).
    private static func hasNonIntegerNumber(_ bytes: [UInt8]) -> Bool {
        var inString = false
        var escaped = false
        var previous: UInt8 = 0
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: ".")
                || ((byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E"))
                    && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(previous))
            {
                return true
            }
            previous = byte
        }
        return false
    }

    /// The largest receipt text read (a receipt with 16 entries of 128 characters is far smaller).
    public static let maximumJSONSize = 65_536

    /// Checks an API answer that may carry a receipt under `receipt`: no object in the whole answer names a key
    /// twice (else which receipt it carries depends on who reads it), and the receipt, if present and not `null`,
    /// reads with ``init(strictJSON:)``. The answer is decoded separately, and from text that passed, every decoder
    /// finds this receipt.
    public static func checkAnswer(_ answer: some Collection<UInt8>) throws(ReceiptError) {
        let bytes = Array(answer)
        let members: [String: Range<Int>]
        do {
            members = try StrictJSON.check(bytes)
        } catch {
            throw ReceiptError("the answer is not strict JSON: \(error.description)")
        }
        guard let range = members["receipt"], !bytes[range].elementsEqual("null".utf8) else { return }
        _ = try Receipt(strictJSON: bytes[range])
    }

    /// Checks the receipt's shape, then its signature against `keys`: its key must be among them.
    public func verify(against keys: ReceiptKeySet) throws(ReceiptError) {
        try validateShape()
        guard let key = keys.keys.first(where: { $0.keyID == keyID }) else {
            let known = keys.keys.map(\.keyID).joined(separator: ", ")
            throw ReceiptError(
                "the receipt is signed by key \(DisplayText.quoted(keyID)), which is not among the trusted keys"
                    + " (\(known.isEmpty ? "none" : known))"
            )
        }
        let publicKey = try key.publicKey()
        guard let signatureBytes = Base64URL.decode(signature), signatureBytes.count == 64 else {
            throw ReceiptError("the signature is not 64 bytes of base64url")
        }
        guard publicKey.isValidSignature(signatureBytes, for: canonicalBytes) else {
            throw ReceiptError("the signature does not match the receipt: it was altered, or not signed by that key")
        }
    }

    /// Checks that the receipt is about what the caller expected: this session, this amount, this kind.
    public func requireMatches(
        sessionID: String,
        amountCents: Cents,
        kind: ReceiptKind = .payment
    )
        throws(ReceiptError)
    {
        guard self.sessionID == sessionID else {
            throw ReceiptError("the receipt is for session \(DisplayText.quoted(self.sessionID)), not \(sessionID)")
        }
        guard self.amountCents == amountCents else {
            throw ReceiptError("the receipt is for \(self.amountCents) cents, not \(amountCents)")
        }
        guard self.kind == kind else {
            throw ReceiptError("the receipt is a \(DisplayText.quoted(self.kind.rawValue)), not a \(kind.rawValue)")
        }
    }

    /// Refuses fields no ledger writes, before any of them is used: the receipt comes from elsewhere.
    func validateShape() throws(ReceiptError) {
        let texts: [(String, String)] = [
            ("id", id), ("sid", sessionID), ("payee_id", payeeID), ("payer_ref", payerReference), ("kid", keyID),
            ("kind", kind.rawValue),
        ]
        for (name, value) in texts + entryIDs.map({ ("entry_ids", $0) }) {
            guard (1...128).contains(value.utf8.count), value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw ReceiptError("\(name) must be 1 to 128 visible ASCII characters")
            }
        }
        guard (1...16).contains(entryIDs.count) else { throw ReceiptError("entry_ids must list 1 to 16 entries") }
        guard amountCents > 0 else { throw ReceiptError("amount_cents must be positive") }
        guard currency.utf8.count == 3, currency.utf8.allSatisfy({ (0x41...0x5A).contains($0) }) else {
            throw ReceiptError("currency must be three capital letters")
        }
        guard issuedAtMilliseconds >= 0 else { throw ReceiptError("issued_at_ms must not be negative") }
        if isSplitFormat {
            guard let tipCents, let shares, let shareNumbers else {
                throw ReceiptError("a receipt with shares or a tip has all of tip_cents, shares and share_numbers")
            }
            guard kind == .payment else { throw ReceiptError("only a payment receipt has shares or a tip") }
            guard tipCents >= 0, tipCents <= amountCents else {
                throw ReceiptError("tip_cents must be from 0 to amount_cents")
            }
            guard (1...50).contains(shares), (1...shares).contains(shareNumbers.count),
                shareNumbers.allSatisfy({ (1...shares).contains($0) }), Set(shareNumbers).count == shareNumbers.count
            else {
                throw ReceiptError("share_numbers must be distinct shares of the 1 to 50 the session has")
            }
        }
    }
}

/// What a receipt records. Decoding keeps kinds this version does not know, so a newer ledger's receipt is still
/// checked (and then shown for what it says) instead of failing to parse.
public struct ReceiptKind: RawRepresentable, Codable, Hashable, Sendable {
    public var rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// A completed payment of a session.
    public static let payment = ReceiptKind(rawValue: "payment")
    /// Money returned to the payer of a paid session (one receipt per refund).
    public static let refund = ReceiptKind(rawValue: "refund")

    public init(from decoder: any Decoder) throws {
        self.rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// Why a receipt does not verify, for a person.
public struct ReceiptError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var description: String

    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}

/// One published receipt key: a JWK (RFC 8037) of type `OKP` on curve `Ed25519`.
public struct ReceiptPublicKey: Codable, Hashable, Sendable {
    /// Always `OKP`.
    public var keyType: String
    /// Always `Ed25519`.
    public var curve: String
    /// The 32-byte public key, base64url without padding.
    public var x: String
    /// The key id receipts name.
    public var keyID: String
    /// `sig`.
    public var use: String?
    /// `EdDSA`.
    public var algorithm: String?

    /// The JWK of a raw 32-byte Ed25519 public key.
    public init(rawPublicKey: Data, keyID: String) {
        self.keyType = "OKP"
        self.curve = "Ed25519"
        self.x = Base64URL.encode(rawPublicKey)
        self.keyID = keyID
        self.use = "sig"
        self.algorithm = "EdDSA"
    }

    enum CodingKeys: String, CodingKey {
        case x, use
        case keyType = "kty"
        case curve = "crv"
        case keyID = "kid"
        case algorithm = "alg"
    }

    /// The key, checked: an Ed25519 public key of 32 bytes.
    public func publicKey() throws(ReceiptError) -> Curve25519.Signing.PublicKey {
        guard keyType == "OKP", curve == "Ed25519" else {
            throw ReceiptError("key \(DisplayText.quoted(keyID)) is not an OKP Ed25519 key")
        }
        guard let raw = Base64URL.decode(x), raw.count == 32,
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw)
        else {
            throw ReceiptError("key \(DisplayText.quoted(keyID)) has no valid 32-byte x")
        }
        return key
    }

    /// The key id of a raw public key: the first 8 bytes of its SHA-256 in hex, prefixed `ed25519-`.
    public static func keyID(rawPublicKey: Data) -> String {
        "ed25519-" + SHA256.hash(data: rawPublicKey).prefix(8).map { String(format: "%02x", $0) }.joined()
    }
}

/// `GET /.well-known/gotchu-receipt-keys`: every key that ever signed a receipt, the current one first (JWKS).
public struct ReceiptKeySet: Codable, Hashable, Sendable {
    /// The keys.
    public var keys: [ReceiptPublicKey]

    /// A key set.
    public init(keys: [ReceiptPublicKey]) { self.keys = keys }

    /// A key set read from JSON (a file or an answer), with every key checked.
    public static func decode(_ data: Data) throws(ReceiptError) -> ReceiptKeySet {
        let set: ReceiptKeySet
        do {
            set = try ReceiptJSON.decoder().decode(ReceiptKeySet.self, from: data)
        } catch {
            throw ReceiptError("not a receipt key set (a JSON object with \"keys\": [{kty, crv, x, kid}]): \(error)")
        }
        for key in set.keys { _ = try key.publicKey() }
        return set
    }
}

/// Signs receipts with one Ed25519 private key.
public struct ReceiptSigner: Sendable {
    /// The key id receipts signed by it name.
    public let keyID: String
    private let privateKey: Curve25519.Signing.PrivateKey

    /// A signer over a raw 32-byte private key.
    public init(rawPrivateKey: Data) throws {
        self.privateKey = try Curve25519.Signing.PrivateKey(rawRepresentation: rawPrivateKey)
        self.keyID = ReceiptPublicKey.keyID(rawPublicKey: privateKey.publicKey.rawRepresentation)
    }

    /// A new random key.
    public static func generate() -> (signer: ReceiptSigner, rawPrivateKey: Data) {
        let raw = Curve25519.Signing.PrivateKey().rawRepresentation
        // A fresh key's raw form always parses.
        return (try! ReceiptSigner(rawPrivateKey: raw), raw)
    }

    /// The public half, as published.
    public var publicKey: ReceiptPublicKey {
        ReceiptPublicKey(rawPublicKey: privateKey.publicKey.rawRepresentation, keyID: keyID)
    }

    /// `receipt` with this signer's key id and signature.
    public func sign(_ receipt: Receipt) throws -> Receipt {
        var signed = receipt
        signed.keyID = keyID
        signed.signature = Base64URL.encode(try privateKey.signature(for: signed.canonicalBytes))
        return signed
    }
}

/// The canonical field encoding of receipts and the ledger's hash chain: a 4-byte big-endian byte count, then the
/// UTF-8 bytes.
public enum CanonicalField {
    /// Appends one field.
    public static func append(_ field: String, to bytes: inout [UInt8]) {
        append(Array(field.utf8), to: &bytes)
    }

    /// Appends one field of raw bytes.
    public static func append(_ field: [UInt8], to bytes: inout [UInt8]) {
        let count = UInt32(field.count)
        bytes += [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)]
        bytes += field
    }
}

/// base64url without padding (RFC 4648 §5), as JWKs and receipts spell bytes.
public enum Base64URL {
    /// Encodes `data`. Straight from bytes to text: the route through Foundation's base64 and three string
    /// replacements cost a payment more than its Ed25519 signature.
    public static func encode(_ data: some DataProtocol) -> String {
        let bytes = Array(data)
        return String(unsafeUninitializedCapacity: (bytes.count * 4 + 2) / 3) { buffer in
            var position = 0
            var index = 0
            while index < bytes.count {
                // Up to three bytes make one group of up to four characters; a short last group has no padding.
                let count = min(3, bytes.count - index)
                var group = UInt32(bytes[index]) << 16
                if count > 1 { group |= UInt32(bytes[index + 1]) << 8 }
                if count > 2 { group |= UInt32(bytes[index + 2]) }
                for character in 0...count {
                    buffer[position] = alphabet[Int(truncatingIfNeeded: group >> UInt32(18 - 6 * character)) & 0x3F]
                    position += 1
                }
                index += count
            }
            return position
        }
    }

    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8
    )

    /// Each byte's value in the alphabet; 0xFF for bytes outside it.
    private static let values: [UInt8] = {
        var values = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() { values[Int(character)] = UInt8(value) }
        return values
    }()

    /// Whether `text` is base64url exactly as ``encode(_:)`` writes it, the one spelling of its bytes: only the URL
    /// alphabet, no padding, no length that leaves a lone character, and the unused low bits of a short last group
    /// zero (RFC 4648 §3.5). Other spellings of the same bytes (another of the last character's look-alikes, `=`
    /// appended) are refused, so a signature or a token cannot be reworded and still pass as the same one.
    public static func isCanonical(_ text: some StringProtocol) -> Bool {
        var count = 0
        var last: UInt8 = 0
        for byte in text.utf8 {
            last = values[Int(byte)]
            guard last != 0xFF else { return false }
            count += 1
        }
        switch count % 4 {
        case 1: return false
        case 2: return last & 0x0F == 0
        case 3: return last & 0x03 == 0
        default: return true
        }
    }

    /// Decodes `text`; `nil` if it is not canonical base64url (``isCanonical(_:)``).
    public static func decode(_ text: String) -> Data? {
        guard isCanonical(text) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}

/// How receipts and receipt keys are spelled in JSON: compact, keys sorted, `/` not escaped, as the ledger API
/// spells every body. Neither holds a date, so no date format is part of it.
enum ReceiptJSON {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    static func decoder() -> JSONDecoder { JSONDecoder() }
}
