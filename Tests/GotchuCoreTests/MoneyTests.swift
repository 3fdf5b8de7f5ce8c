import GotchuCore
import Testing

@Suite("Money", .timeLimit(.minutes(10)))
struct MoneyTests {
    @Test(
        "Decimal amounts parse exactly into cents",
        arguments: [
            ("12.5", 1_250), ("12.50", 1_250), ("0.01", 1), ("12", 1_200), (" 7.05 ", 705),
            ("92233720368547758.07", Int64.max),
        ] as [(String, Int64)]
    )
    func parses(text: String, cents: Int64) throws {
        #expect(try Money.parse(text) == cents)
    }

    @Test(
        "Bad amounts are refused with a reason",
        arguments: [
            ("-1", Money.ParseError.negative), ("1e3", .notADecimal("1e3")), ("12.345", .tooManyDecimals("12.345")),
            ("abc", .notADecimal("abc")), ("", .empty), ("0", .zero), ("0.00", .zero), ("12.", .notADecimal("12.")),
            (".5", .notADecimal(".5")), ("1,000", .notADecimal("1,000")), ("+5", .notADecimal("+5")),
            ("1.2.3", .notADecimal("1.2.3")), ("92233720368547758.08", .tooLarge("92233720368547758.08")),
            ("١٢", .notADecimal("١٢")),
        ]
    )
    func refuses(text: String, error: Money.ParseError) {
        #expect(throws: error) { try Money.parse(text) }
        #expect(!error.description.isEmpty)
    }

    @Test("Cents format as dollars with two decimals")
    func formats() {
        #expect(Money.format(1_250) == "$12.50")
        #expect(Money.format(5) == "$0.05")
        #expect(Money.format(0) == "$0.00")
        #expect(Money.format(-105) == "-$1.05")
        #expect(Money.format(Int64.min) == "-$92233720368547758.08")
    }

    @Test("Formatting then parsing gives back the amount")
    func roundTrip() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1_000 {
            let cents = Int64.random(in: 1...Int64.max, using: &generator)
            #expect(try Money.parse(String(Money.format(cents).dropFirst())) == cents)
        }
    }
}

@Suite("EID", .timeLimit(.minutes(10)))
struct EIDTests {
    @Test("Valid text EIDs are 10 lowercase hex characters")
    func validation() {
        #expect(EID(rawValue: "a1b2c3d4e5") != nil)
        for bad in ["A1B2C3D4E5", "a1b2c3d4e", "a1b2c3d4e5f", "g1b2c3d4e5", "", "a1b2c3d4é"] {
            #expect(EID(rawValue: bad) == nil, "\(bad)")
        }
    }

    @Test("Service data is the 10 ASCII bytes; anything else is refused")
    func serviceData() {
        let eid = EID(rawValue: "a1b2c3d4e5")!
        #expect(eid.serviceData == Array("a1b2c3d4e5".utf8))
        #expect(EID(serviceData: eid.serviceData) == eid)
        #expect(EID(serviceData: [0xA1, 0xB2, 0xC3, 0xD4, 0xE5]) == nil)
        #expect(EID(serviceData: Array("a1b2c3d4e5 ".utf8)) == nil)
        #expect(EID(serviceData: [UInt8](repeating: 0xFF, count: 10)) == nil)
        #expect(EID(serviceData: []) == nil)
    }

    @Test("Bytes map to hex and random EIDs are valid")
    func bytes() {
        #expect(EID(bytes: [0x00, 0x1F, 0xA0, 0xFF, 0x09])?.rawValue == "001fa0ff09")
        #expect(EID(bytes: [0x00]) == nil)
        for _ in 0..<100 { #expect(EID(rawValue: EID.random().rawValue) != nil) }
    }
}

@Suite("Bluetooth UUID", .timeLimit(.minutes(10)))
struct BluetoothUUIDTests {
    @Test("16-, 32- and 128-bit forms of 0xFEED are one UUID")
    func forms() {
        let full = "0000feed-0000-1000-8000-00805f9b34fb"
        #expect(BluetoothUUID("feed")?.uuidString == full)
        #expect(BluetoothUUID("FEED")?.uuidString == full)
        #expect(BluetoothUUID("0000feed")?.uuidString == full)
        #expect(BluetoothUUID(full.uppercased())?.uuidString == full)
        #expect(BluetoothUUID.gotchu.shortForm == "feed")
        #expect(BluetoothUUID("12345678-1234-5678-1234-567812345678")?.shortForm == nil)
        for bad in [
            "fee", "feedz", "0000feed-0000-1000-8000-00805f9b34f", "0000feed000010008000-00805f9b34fb--", "xyzw",
        ] {
            #expect(BluetoothUUID(bad) == nil, "\(bad)")
        }
    }
}
