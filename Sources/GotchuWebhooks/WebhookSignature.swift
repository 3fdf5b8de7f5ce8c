import Crypto
public import Foundation

/// The `Gotchu-Signature` header of a webhook delivery: `t=UNIX_SECONDS,v1=HEX`, where HEX is the lowercase
/// hexadecimal HMAC-SHA256 of `"{t}.{raw body}"` keyed with the endpoint's secret (the whole `whsec_…` text, as
/// UTF-8). While a rotated-away secret is still honoured, a second `v1=` signs with it, so a receiver that still
/// knows only the old secret keeps verifying.
public enum WebhookSignature {
    /// The header's name.
    public static let headerName = "Gotchu-Signature"
    /// How far a receiver should let `t` lie from its own clock before it refuses a delivery as a replay.
    public static let tolerance: Duration = .seconds(300)

    /// The signature of `body` sent at `timestamp` (seconds since 1970), under `secret`: lowercase hex.
    public static func sign(body: some DataProtocol, timestamp: Int64, secret: String) -> String {
        var message = Data("\(timestamp).".utf8)
        message.append(contentsOf: body)
        let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8)))
        return hex(code)
    }

    /// The header's value for `body` sent at `timestamp`: one `v1=` per secret, in the order given (the current
    /// secret first).
    public static func header(body: some DataProtocol, timestamp: Int64, secrets: [String]) -> String {
        (["t=\(timestamp)"] + secrets.map { "v1=" + sign(body: body, timestamp: timestamp, secret: $0) })
            .joined(separator: ",")
    }

    /// Whether `header` carries a valid signature of `body` under `secret`, made within ``tolerance`` of `now`;
    /// what a receiver written in Swift does with each delivery. The comparison takes the same time whatever the
    /// signature's bytes.
    public static func isValid(
        header: String,
        body: some DataProtocol,
        secret: String,
        now: Date = Date(),
        tolerance: Duration = Self.tolerance
    ) -> Bool {
        var timestamp: Int64?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            switch pair[0].trimmingCharacters(in: .whitespaces) {
            case "t": timestamp = Int64(pair[1])
            case "v1": signatures.append(String(pair[1]))
            default: continue
            }
        }
        guard let timestamp, abs(now.timeIntervalSince1970 - Double(timestamp)) <= Double(tolerance.components.seconds)
        else { return false }
        let expected = Array(sign(body: body, timestamp: timestamp, secret: secret).utf8)
        return signatures.contains { candidate in
            let bytes = Array(candidate.utf8)
            guard bytes.count == expected.count else { return false }
            return zip(bytes, expected).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
        }
    }

    private static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
