import Foundation
package import GotchuAPI
import GotchuCore

/// The checks an e-mail address passes where it enters the ledger, because payers are shown parts of it: the part
/// before the `@` becomes the display name, the domain tells payees of one name apart.
package enum EmailAddress {
    /// The longest name part, in Unicode scalars (RFC 5321 allows 64 octets; scalars keep non-ASCII names usable).
    package static let maximumNameLength = 64
    /// The longest address, in Unicode scalars.
    static let maximumLength = 254

    /// `text` trimmed, lowercased and in Unicode NFC, or a 400 problem saying what is wrong with it.
    ///
    /// The name part may be any visible text but holds no control, format, bidi, invisible or look-alike blank
    /// character (so a name cannot rewrite or reorder what a payer reads) and no white space. The domain is ASCII
    /// letters, digits, hyphens and dots (an internationalised domain in its `xn--` form), so it cannot imitate
    /// another with look-alike letters.
    package static func normalize(_ text: String) throws(Problem) -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let email = trimmed.precomposedStringWithCanonicalMapping
        let scalars = Array(email.unicodeScalars)
        guard scalars.count <= maximumLength else {
            throw Problem(.badRequest, detail: "email must be at most \(maximumLength) characters long")
        }
        if let bad = scalars.first(where: isForbidden) {
            throw Problem(
                .badRequest,
                detail: "email must not contain control, format, bidi, invisible or blank look-alike characters "
                    + "(it contains U+\(hex(bad)))"
            )
        }
        // Unicode scalars, not characters: "@" followed by a combining mark or an emoji modifier is one character.
        let parts = scalars.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, !scalars.contains(" ") else {
            throw Problem(.badRequest, detail: "email must look like name@example.com")
        }
        guard parts[0].count <= maximumNameLength else {
            throw Problem(
                .badRequest,
                detail: "the part of email before the @ must be at most \(maximumNameLength) characters long"
            )
        }
        let labels = parts[1].split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2,
            labels.allSatisfy({ label in
                (1...63).contains(label.count) && label.allSatisfy { $0.isASCII && isDomainCharacter(UInt8($0.value)) }
            })
        else {
            throw Problem(
                .badRequest,
                detail: "the domain of email must be letters a-z, digits, hyphens and dots, such as example.com "
                    + "(an internationalised domain in its xn-- form)"
            )
        }
        return email
    }

    /// A display name an operator gives (`gotchu admin user add --name`, `merchant verify --name`), trimmed and in
    /// NFC, or a 400 problem: 1 to 64 characters, none of them control, format, bidi, invisible or look-alike blank
    /// (spaces are fine: "Corner Shop").
    package static func displayName(_ text: String) throws(Problem) -> String {
        let name = text.trimmingCharacters(in: .whitespaces).precomposedStringWithCanonicalMapping
        let scalars = Array(name.unicodeScalars)
        guard (1...maximumNameLength).contains(scalars.count) else {
            throw Problem(.badRequest, detail: "a name must be 1 to \(maximumNameLength) characters long")
        }
        if let bad = scalars.first(where: { $0 != " " && (isForbidden($0) || $0.properties.isWhitespace) }) {
            throw Problem(
                .badRequest,
                detail: "a name must not contain control, format, bidi, invisible or blank look-alike characters "
                    + "(it contains U+\(hex(bad)))"
            )
        }
        return name
    }

    /// `display` as it may leave the server: a name or domain stored before these checks existed has each
    /// forbidden character replaced by U+FFFD and is cut to the longest name allowed now.
    package static func cleaned(_ display: PayeeDisplay) -> PayeeDisplay {
        PayeeDisplay(
            name: cleaned(display.name, limit: maximumNameLength),
            domain: display.domain.map { cleaned($0, limit: maximumLength) },
            verified: display.verified
        )
    }

    private static func cleaned(_ text: String, limit: Int) -> String {
        // Printable ASCII is already in NFC and holds nothing forbidden: what nearly every name is passes untouched,
        // without the normalisation and property lookups below (a visible share of a resolve's time).
        if text.utf8.count <= limit, text.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.precomposedStringWithCanonicalMapping.unicodeScalars.prefix(limit) {
            result.append(isForbidden(scalar) ? "\u{FFFD}" : scalar)
        }
        return String(result)
    }

    /// What no name or address may hold: what ``DisplayText`` would escape, except private-use and unassigned code
    /// points, which are shown escaped but harm nobody stored.
    private static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .privateUse, .unassigned: return false
        default: return DisplayText.isUnsafe(scalar)
        }
    }

    private static func isDomainCharacter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || byte == UInt8(ascii: "-")
    }

    private static func hex(_ scalar: Unicode.Scalar) -> String {
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
