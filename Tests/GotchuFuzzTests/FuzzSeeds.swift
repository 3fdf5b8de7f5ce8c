/// The corpus: valid inputs to mutate and known tricky cases, including every input that once broke a parser (kept as
/// regression seeds; each says what it broke).
enum FuzzSeeds {
    static let eidTexts = [
        "a1b2c3d4e5", "0000000000", "ffffffffff", "A1B2C3D4E5", "a1b2c3d4e", "a1b2c3d4e5f", "a1b2c3d4eg",
        "a1b2c3d4e\u{0}",
        "a1b2c3d4é", "ａ1b2c3d4e5", "a1b2c3d4e\u{301}", " a1b2c3d4e5", "", "0x12345678",
    ]

    static let serviceData: [[UInt8]] = [
        Array("a1b2c3d4e5".utf8), [], [0], Array(repeating: 0x61, count: 10), Array(repeating: 0xFF, count: 10),
        Array("a1b2c3d4e5".utf8) + [0], [0xC3, 0xA9] + Array("a1b2c3d4".utf8), Array(repeating: 0x30, count: 255),
    ]

    static let amounts = [
        "12.50", "12.5", "12", "0.01", "0", "0.00", "00.01", "-1", "+1", "1e3", "1E3", "1.", ".5", "1.234", "1,000",
        "1_000", " 7 ", "\t7\n", "92233720368547758.07", "92233720368547758.08", "9223372036854775807",
        "000000000000000000000000000001", "٣", "１", "1.0.0", "5\u{301}", "0x10", "∞", "NaN", "", " ",
    ]

    static let uuids = [
        "feed", "FEED", "0000feed", "0000feed-0000-1000-8000-00805f9b34fb", "0000FEED-0000-1000-8000-00805F9B34FB",
        "0000feed00001000800000805f9b34fb", "0000feed-0000-1000-8000-00805f9b34f", "fee", "feedf", "fe-ed", "ｆeed",
        "0000feed-0000-1000-8000-00805f9b34fb-", "\u{212A}eed",
        // Regression: dashes counted as hex digits, so "----" and "fe-d" were accepted as 16-bit UUIDs.
        "----", "fe-d", "--------", "0000-eed",
    ]
}

extension FuzzSeeds {
    static let requestBodies = [
        #"{"email":"ana@example.com"}"#, #"{"amount_cents":1250}"#, #"{"eid":"a1b2c3d4e5"}"#,
        #"{"sid":"3f1c9a2e-1b7d-4c55-9a0e-2d8f6b4c1a77"}"#, #"{"amount_cents":"1250"}"#, #"{"amount_cents":12.5}"#,
        #"{"amount_cents":null}"#, #"{"amount_cents":1250,"amount_cents":"x"}"#, #"{"eid":null,"sid":7}"#, "{}", "[]",
        "", #"{"amount_cents":9223372036854775808}"#, #"{"amount_cents":1e2}"#, #"{"amount_cents":-0}"#,
        // Regression: integer decoding went through Double and rounded these to 1 and 9007199254740992.
        #"{"amount_cents":1.0000000000000000001}"#, #"{"amount_cents":9007199254740993.0}"#,
    ]

    static let responseBodies = [
        #"{"token":"t","user_id":"u"}"#,
        #"{"wallet_id":"w","available_cents":"1250","recent":[{"id":"e","direction":"DEBIT","amount_cents":5,"#
            + #""type":"SEND_P2P","ref_type":"session","ref_id":"s","created_at":"2026-01-02T03:04:05.678Z"}]}"#,
        #"{"sid":"s","eid":"a1b2c3d4e5","exp_at":"2026-01-02T03:04:05Z"}"#,
        #"{"sid":"s","amount_cents":1250,"payee_display":{"name":"Ana"}}"#,
        #"{"ok":true}"#, #"{"ok":true,"new_balance_cents":"-9223372036854775808"}"#,
        #"{"sid":"s","status":"PAID","amount_cents":1,"exp_at":"2026-01-02T03:04:05Z","paid_at":null}"#,
        #"{"status":"ok"}"#, #"{"created_at":"2026-13-45T25:61:61Z"}"#,
    ]
}
