/// The JWS compact serialization (RFC 7515 §7.1) as the ledger accepts it (its own tokens and an external issuer's).
package enum CompactJWS {
    /// Whether `token` is three non-empty segments (header, payload, signature) joined by dots, each canonical
    /// base64url (``Base64URL/isCanonical(_:)``). jwt-kit decodes the segments leniently: a signature whose last
    /// character is swapped for one that differs only in the bits no byte uses, or with `=` appended, decodes to the
    /// same bytes and would verify; a token that is not spelled exactly as it was signed is refused here first.
    package static func isCanonical(_ token: String) -> Bool {
        let segments = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else { return false }
        return segments.allSatisfy { segment in
            !segment.isEmpty && Base64URL.isCanonical(Substring(segment))
        }
    }
}
