import GotchuCore
import Testing

@Suite("Tips and shares", .timeLimit(.minutes(10)))
struct TipTests {
    @Test(
        "Tips parse exactly: amounts into cents, percentages into hundredths of a percent",
        arguments: [
            ("2.00", Tip.cents(200)), ("2", .cents(200)), ("0.5", .cents(50)), (" 1.25 ", .cents(125)),
            ("15%", .percent(hundredths: 1_500)), ("12.5%", .percent(hundredths: 1_250)),
            ("0.25%", .percent(hundredths: 25)), ("100%", .percent(hundredths: 10_000)),
            ("100.00%", .percent(hundredths: 10_000)), (" 20% ", .percent(hundredths: 2_000)),
            ("0", .cents(0)), ("0.00", .cents(0)), ("0%", .percent(hundredths: 0)),
        ] as [(String, Tip)]
    )
    func parses(text: String, tip: Tip) throws {
        #expect(try Tip.parse(text) == tip)
    }

    @Test(
        "Bad tips are refused with a reason",
        arguments: [
            ("", Tip.ParseError.empty), ("   ", .empty), ("-1", .negative), ("-5%", .negative),
            ("abc", .notATip("abc")), ("$2", .notATip("$2")), ("2.", .notATip("2.")), ("%", .notATip("%")),
            ("15 %", .notATip("15 %")), ("15%%", .notATip("15%%")), ("1e2%", .notATip("1e2%")),
            ("+5%", .notATip("+5%")), (".5%", .notATip(".5%")), ("1.2.3%", .notATip("1.2.3%")),
            ("١٥%", .notATip("١٥%")), ("2.345", .tooManyDecimals("2.345")), ("12.125%", .tooManyDecimals("12.125%")),
            ("100.01%", .percentTooLarge("100.01%")), ("150%", .percentTooLarge("150%")),
            ("99999999999999999999999%", .percentTooLarge("99999999999999999999999%")),
            ("92233720368547758.08", .tooLarge("92233720368547758.08")),
        ] as [(String, Tip.ParseError)]
    )
    func refuses(text: String, error: Tip.ParseError) {
        #expect(throws: error) { try Tip.parse(text) }
        #expect(!error.description.isEmpty)
    }

    @Test(
        "A percentage is of the amount paid, rounded to the nearest cent, half a cent up",
        arguments: [
            (1_500, 1_000, 150), (1_500, 1_001, 150), (1_500, 1_003, 150), (1_500, 1_004, 151), (1_500, 10, 2),
            (1_250, 4, 1), (1_250, 3, 0), (10_000, 4_000, 4_000), (0, 4_000, 0), (1, 5_000, 1), (1, 4_999, 0),
            (3_333, 100, 33), (1_800, 2_513, 452), (2_000, Cents.max, Cents.max / 5),
        ] as [(Int64, Cents, Cents)]
    )
    func percentage(hundredths: Int64, amount: Cents, tip: Cents) {
        #expect(Tip.percent(hundredths: hundredths).cents(on: amount) == tip)
    }

    @Test("A fixed tip is the same whatever is paid; each tip prints as it is typed")
    func fixedAndPrinted() throws {
        #expect(Tip.cents(200).cents(on: 1) == 200)
        #expect(Tip.cents(200).description == "$2.00")
        #expect(Tip.percent(hundredths: 1_500).description == "15%")
        #expect(Tip.percent(hundredths: 1_250).description == "12.5%")
        #expect(Tip.percent(hundredths: 1_205).description == "12.05%")
        #expect(Tip.percent(hundredths: 25).description == "0.25%")
        #expect(try Tip.parse("0%").isZero && Tip.parse("0").isZero && !Tip.parse("1%").isZero)
    }

    @Test("Shares are equal; the cents that do not divide go to the first shares")
    func shareAmounts() {
        #expect(SessionShares.amounts(of: 1_001, count: 4) == [251, 250, 250, 250])
        #expect(SessionShares.amounts(of: 4_000, count: 4) == [1_000, 1_000, 1_000, 1_000])
        #expect(SessionShares.amounts(of: 1_003, count: 4) == [251, 251, 251, 250])
        #expect(SessionShares.amounts(of: 3, count: 3) == [1, 1, 1])
        #expect(SessionShares.amounts(of: 1_250, count: 1) == [1_250])
        #expect(SessionShares.amounts(of: 1_000, count: 0).isEmpty)
    }

    @Test("What K shares cost is reckoned from the next free share on")
    func sharesCost() {
        let fresh = SessionShares(count: 4, paid: 0, nextShareCents: 251, remainingCents: 1_001)
        #expect(fresh.cents(ofShares: 1, amountCents: 1_001) == 251)
        #expect(fresh.cents(ofShares: 2, amountCents: 1_001) == 501)
        #expect(fresh.cents(ofShares: 4, amountCents: 1_001) == 1_001)
        // The first share is locked by someone else: the next free one is an even one.
        let locked = SessionShares(count: 4, paid: 0, nextShareCents: 250, remainingCents: 1_001)
        #expect(locked.cents(ofShares: 2, amountCents: 1_001) == 500)
        let half = SessionShares(count: 4, paid: 2, nextShareCents: 1_000, remainingCents: 2_000)
        #expect(half.cents(ofShares: 2, amountCents: 4_000) == 2_000)
        // More than are left: each further one counts as the next, and the ledger refuses the lock.
        #expect(half.cents(ofShares: 3, amountCents: 4_000) == 3_000)
        #expect(half.isSplit && !SessionShares(count: 1, paid: 0, nextShareCents: 5, remainingCents: 5).isSplit)
    }
}
