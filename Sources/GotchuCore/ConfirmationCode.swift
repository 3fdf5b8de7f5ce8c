/// The short code a terminal shows beside its EID and a payer's device prints in its question ("…, code 47?"), so
/// the payer can check that the session being paid is the one on the screen in front of them.
///
/// Both sides derive it from the session id, which the terminal gets when it creates the session and the payer gets
/// from resolve: the two decimal digits of the 64-bit FNV-1a hash of the id's UTF-8 bytes (lowercased), modulo 100.
/// Nothing about it travels on the air, so it does not link two EIDs of one session. It is a check for people, not a
/// secret: one session in a hundred shares a given code, which is why the payee's name and the amount are still
/// what the payer confirms.
public enum ConfirmationCode {
    /// The code of the session `sessionID`, two digits (`"07"`).
    public static func of(sessionID: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sessionID.lowercased().utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let code = hash % 100
        return code < 10 ? "0\(code)" : "\(code)"
    }
}

extension EID {
    /// The EID as a person reads and types it: groups of four characters, such as `a1b2 c3d4 e5`.
    public var grouped: String {
        var text = ""
        for (index, character) in rawValue.enumerated() {
            if index > 0, index % 4 == 0 { text.append(" ") }
            text.append(character)
        }
        return text
    }

    /// An EID typed by a person: upper case, spaces, hyphens and colons are accepted (`A1B2 C3D4 E5`,
    /// `a1b2-c3d4-e5`); anything else is `nil`.
    public init?(typed text: String) {
        guard text.utf8.count <= 64 else { return nil }
        let kept = text.lowercased().filter { ![" ", "-", ":", "\t"].contains($0) }
        self.init(rawValue: kept)
    }
}
