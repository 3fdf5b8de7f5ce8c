import GotchuCore
import Testing

@Suite(.timeLimit(.minutes(10))) struct ConfirmationCodeTests {
    /// Values computed apart from this code (FNV-1a 64 of the lowercased id, modulo 100): the terminal's display
    /// script and any other client must print the same two digits.
    @Test(arguments: [
        ("s", "94"), ("session-1", "61"), ("6f1c2a7e-0000-4000-8000-000000000001", "43"),
        ("6F1C2A7E-0000-4000-8000-000000000001", "43"), ("", "37"),
    ])
    func derivedFromTheSessionID(sessionID: String, code: String) {
        #expect(ConfirmationCode.of(sessionID: sessionID) == code)
    }

    @Test func eidsAreGroupedForPeopleAndTypedBackLeniently() throws {
        let eid = try #require(EID(rawValue: "a1b2c3d4e5"))
        #expect(eid.grouped == "a1b2 c3d4 e5")
        for typed in ["a1b2c3d4e5", "a1b2 c3d4 e5", "A1B2-C3D4-E5", " a1b2:c3d4:e5 "] {
            #expect(EID(typed: typed) == eid, "\(typed)")
        }
        for bad in [
            "", "a1b2c3d4e", "a1b2c3d4e5f", "g1b2c3d4e5", "a1b2\u{200B}c3d4e5", String(repeating: " ", count: 100),
        ] {
            #expect(EID(typed: bad) == nil, "\(bad.debugDescription)")
        }
    }
}
