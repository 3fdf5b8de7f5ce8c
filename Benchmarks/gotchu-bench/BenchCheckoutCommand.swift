import ArgumentParser
import Foundation
import GotchuCore
import GotchuLedgerSQLite
import GotchuLedgerServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct BenchCheckoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkout",
        abstract: "Time from opening a checkout address to its receipt over loopback, and the checkout's page weight.",
        discussion: """
            A ledger on a fresh SQLite file serves the web checkout on a loopback port (no rate limits). \
            Each run makes a fresh session (untimed), then does over HTTP/1.1 what a phone's browser does \
            with no cookie yet: GET /p/EID (the sign-in page, then its style sheet), POST the e-mail and \
            password to /p/EID/sign-in, follow the 303 to the pay page (and fetch its style sheet and \
            script, as on a phone's first visit), POST the pay form with its page view id and \
            CSRF tag, follow the 303 to the receipt page and its style sheet. One keep-alive connection, \
            the session cookie carried; the page's event stream and icon are left out of the times. Prints the median \
            and 95th percentile of each step and of the whole, after --warmup untimed runs, and the bytes \
            of each page with what it loads. Sign-in checks the password with bcrypt at --bcrypt-cost.
            """
    )

    @Option(help: "Timed runs, one fresh session each.")
    var runs = 100

    @Option(help: "Untimed runs first.")
    var warmup = 5

    @Option(help: ArgumentHelp("bcrypt cost of the payer's password (\(Passwords.allowedCosts)).", valueName: "cost"))
    var bcryptCost = Passwords.defaultCost

    func validate() throws {
        guard (1...100_000).contains(runs), (0...10_000).contains(warmup) else {
            throw ValidationError("--runs must be 1...100000 and --warmup 0...10000")
        }
        guard Passwords.allowedCosts.contains(bcryptCost) else {
            throw ValidationError("--bcrypt-cost must be \(Passwords.allowedCosts), got \(bcryptCost)")
        }
    }

    func run() async throws {
        let runs = self.runs
        let warmup = self.warmup
        let password = "benchmark password"
        var policy = LedgerPolicy()
        policy.passwordCost = bcryptCost
        print("checkout benchmark: \(runs) runs after \(warmup) untimed, bcrypt cost \(bcryptCost), SQLite")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteLedgerStore(path: directory.appendingPathComponent("ledger.sqlite").path, policy: policy)
        try await store.migrate()
        let payee = try await store.addUser(
            email: "shop@example.com",
            displayName: "Corner Shop",
            password: password,
            actor: "bench"
        )
        let payer = try await store.addUser(
            email: "payer@example.com",
            displayName: "Pat",
            password: password,
            actor: "bench"
        )
        _ = try await store.fund(userID: payer.id, amountCents: Cents(runs + warmup) * 1250)
        let tokens = try await TokenAuthority(secret: UUID().uuidString + UUID().uuidString)
        let (timings, weights) = try await LedgerServer.withRunning(
            store: store,
            .inProcess(tokens: tokens) { $0.developmentMode = false }
        ) { url in
            let port = url.port ?? 0
            var timings: [CheckoutTimings] = []
            var weights: [String: Int] = [:]
            for round in 0..<(warmup + runs) {
                let session = try await store.createSession(payeeID: payee.id, amountCents: 1250, idempotencyKey: nil)
                    .session
                let eid = session.eid.rawValue
                let result = try await onThread {
                    try CheckoutRun.run(port: port, eid: eid, email: "payer@example.com", password: password)
                }
                if round >= warmup { timings.append(result.timings) }
                weights = result.weights
            }
            return (timings, weights)
        }
        // Funded with exactly what the runs pay: anything left, or missing, is a run that did not pay once.
        let left = try await store.wallet(userID: payer.id, recentLimit: 0).balance
        guard left == 0 else { throw CLIError("the payer's wallet holds \(left) cents after the runs, not 0") }
        func line(_ name: String, _ values: [Duration]) {
            let milliseconds = values.map { $0 / .milliseconds(1) }.sorted()
            let figures = String(
                format: "p50 %8.2f ms   p95 %8.2f ms",
                Self.percentile(milliseconds, 50),
                Self.percentile(milliseconds, 95)
            )
            print("  " + name.padding(toLength: 44, withPad: " ", startingAt: 0) + figures)
        }
        print("time over loopback (\(runs) runs, one fresh session each):")
        line("open the address (sign-in page + CSS)", timings.map(\.open))
        line("sign in (POST, 303, pay page + CSS + JS)", timings.map(\.signIn))
        line("pay (POST, 303, receipt page + CSS)", timings.map(\.pay))
        line("open to receipt, in all", timings.map(\.total))
        print("page weight in bytes (bodies as sent; no compression):")
        for page in ["sign-in page", "pay page", "receipt page"] {
            let html = weights[page] ?? 0
            let css = weights["checkout.css"] ?? 0
            let js = page == "pay page" ? weights["checkout.js"] ?? 0 : 0
            let icon = weights["icon.svg"] ?? 0
            let parts = "HTML \(html) + CSS \(css)" + (js > 0 ? " + JS \(js)" : "") + " + icon \(icon)"
            print("  \(page.padding(toLength: 14, withPad: " ", startingAt: 0)) \(html + css + js + icon) (\(parts))")
        }
    }

    /// The nearest-rank `percent`th percentile of `sorted`.
    static func percentile(_ sorted: [Double], _ percent: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let rank = Int((percent / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(sorted.count, max(1, rank)) - 1]
    }
}

/// Runs `body` on a thread of its own, off the concurrency pool the server's handlers share, so its blocking reads
/// hold up none of them.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// The steps of one run, each from its first byte sent to the last byte of what it loads.
struct CheckoutTimings: Sendable {
    var open: Duration
    var signIn: Duration
    var pay: Duration
    var total: Duration
}

/// One payer's way from the checkout address to the receipt, over one keep-alive connection.
enum CheckoutRun {
    struct Result: Sendable {
        var timings: CheckoutTimings
        /// Bytes of each page's body and of each asset, by name.
        var weights: [String: Int]
    }

    static func run(port: Int, eid: String, email: String, password: String) throws -> Result {
        let connection = try BenchHTTPConnection(port: port)
        defer { connection.disconnect() }
        var cookie: String?
        var weights: [String: Int] = [:]
        func exchange(_ method: String, _ path: String, form: [(String, String)]? = nil) throws -> BenchHTTPAnswer {
            var headers = [("Accept", "text/html")]
            if let cookie { headers.append(("Cookie", cookie)) }
            var body: [UInt8] = []
            if let form {
                body = Array(encode(form).utf8)
                headers += [
                    ("Content-Type", "application/x-www-form-urlencoded"), ("Origin", "http://127.0.0.1:\(port)"),
                    ("Sec-Fetch-Site", "same-origin"),
                ]
            }
            let answer = try connection.exchange(method, path, headers: headers, body: body)
            if let setCookie = answer.headers["set-cookie"] {
                cookie = setCookie.contains("Max-Age=0") ? nil : String(setCookie.prefix { $0 != ";" })
            }
            return answer
        }
        /// Loads a page and what it links to (style sheet, script), as a browser with nothing cached does.
        func page(_ path: String, _ name: String) throws -> String {
            let answer = try exchange("GET", path)
            guard answer.status == 200 else { throw CLIError("GET \(path) answered \(answer.status)") }
            let html = String(decoding: answer.body, as: UTF8.self)
            weights[name] = answer.body.count
            for pattern in ["<link rel=\"stylesheet\" href=\"", "<script src=\""] {
                guard let range = html.range(of: pattern) else { continue }
                let reference = String(html[range.upperBound...].prefix { $0 != "\"" })
                let asset = try resolve(reference, against: path)
                let loaded = try exchange("GET", asset)
                guard loaded.status == 200 else { throw CLIError("GET \(asset) answered \(loaded.status)") }
                weights[String(asset.split(separator: "/").last ?? "")] = loaded.body.count
            }
            return html
        }
        func follow(_ answer: BenchHTTPAnswer, from path: String) throws -> String {
            guard answer.status == 303, let location = answer.headers["location"] else {
                throw CLIError("expected a 303 from \(path), got \(answer.status)")
            }
            return try resolve(location, against: path)
        }
        let clock = ContinuousClock()
        let start = clock.now
        let pagePath = "/p/\(eid)"
        _ = try page(pagePath, "sign-in page")
        let opened = clock.now
        let signInPath = "/p/\(eid)/sign-in"
        let signedIn = try exchange("POST", signInPath, form: [("email", email), ("password", password)])
        let payPage = try page(try follow(signedIn, from: signInPath), "pay page")
        let shown = clock.now
        guard let action = field(payPage, before: "method=\"post\" action=\"", in: "<form id=\"pay\"") else {
            throw CLIError("the pay page has no pay form")
        }
        var form: [(String, String)] = []
        for name in ["view", "sid", "amount", "csrf"] {
            guard let value = field(payPage, before: "name=\"\(name)\" value=\"", in: "<form id=\"pay\"") else {
                throw CLIError("the pay form has no \(name)")
            }
            form.append((name, value))
        }
        form.append(("tip", "0"))
        let payPath = try resolve(action, against: pagePath)
        let paid = try exchange("POST", payPath, form: form)
        let receipt = try page(try follow(paid, from: payPath), "receipt page")
        let end = clock.now
        guard receipt.contains("<h1 id=\"outcome\">Paid</h1>") else { throw CLIError("the receipt page says no Paid") }
        // The icon, untimed: a browser fetches it beside the page, not on the way to the receipt.
        if let icon = field(payPage, before: "<link rel=\"icon\" href=\"") {
            let answer = try exchange("GET", try resolve(icon, against: pagePath))
            if answer.status == 200 { weights["icon.svg"] = answer.body.count }
        }
        return Result(
            timings: CheckoutTimings(
                open: opened - start,
                signIn: shown - opened,
                pay: end - shown,
                total: end - start
            ),
            weights: weights
        )
    }

    /// The attribute value after `marker` (in the part of `html` from `scope` on), HTML escapes undone.
    static func field(_ html: String, before marker: String, in scope: String? = nil) -> String? {
        var text = Substring(html)
        if let scope {
            guard let range = text.range(of: scope) else { return nil }
            text = text[range.lowerBound...]
        }
        guard let range = text.range(of: marker) else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "\"" }).replacingOccurrences(of: "&quot;", with: "\"")
            .replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&lt;", with: "<")
            .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
    }

    /// `reference` resolved against the path `base`, as path and query.
    static func resolve(_ reference: String, against base: String) throws -> String {
        guard let baseURL = URL(string: "http://127.0.0.1" + base),
            let url = URL(string: reference, relativeTo: baseURL)?.absoluteURL,
            let components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        else { throw CLIError("cannot resolve \(reference) against \(base)") }
        return components.percentEncodedPath + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    /// `form` as `application/x-www-form-urlencoded`.
    static func encode(_ form: [(String, String)]) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return form.map { name, value in
            (name.addingPercentEncoding(withAllowedCharacters: allowed) ?? "") + "="
                + (value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
        }.joined(separator: "&")
    }
}

/// An answer: status, headers (names in lower case) and body.
struct BenchHTTPAnswer {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
}

/// A blocking HTTP/1.1 client on one keep-alive loopback connection, for bodies with a `Content-Length` or chunked.
final class BenchHTTPConnection {
    private let descriptor: Int32
    private var unread: [UInt8] = []

    init(port: Int) throws {
        #if canImport(Glibc)
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw CLIError("socket() failed: errno \(errno)") }
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                connect(descriptor, address, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            close(descriptor)
            throw CLIError("connect to port \(port) failed: errno \(error)")
        }
    }

    func disconnect() { close(descriptor) }

    /// Sends one request and reads its whole answer.
    func exchange(
        _ method: String,
        _ path: String,
        headers: [(String, String)],
        body: [UInt8]
    ) throws -> BenchHTTPAnswer {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        try transmit(Array((head + "\r\n").utf8) + body)
        let headEnd = try readUntil([13, 10, 13, 10])
        let headText = String(decoding: unread[..<headEnd], as: UTF8.self)
        unread.removeFirst(headEnd + 4)
        let lines = headText.components(separatedBy: "\r\n")
        let statusWords = lines.first?.split(separator: " ") ?? []
        guard statusWords.count >= 2, let status = Int(statusWords[1]) else {
            throw CLIError("not an HTTP answer: \(lines.first ?? "")")
        }
        var fields: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var content: [UInt8] = []
        if fields["transfer-encoding"]?.lowercased() == "chunked" {
            while true {
                let lineEnd = try readUntil([13, 10])
                let sizeText = String(decoding: unread[..<lineEnd], as: UTF8.self).prefix { $0 != ";" }
                unread.removeFirst(lineEnd + 2)
                guard let size = Int(sizeText, radix: 16) else { throw CLIError("a bad chunk size") }
                try fill(size + 2)
                content += unread[..<size]
                unread.removeFirst(size + 2)
                if size == 0 { break }
            }
        } else {
            let length = Int(fields["content-length"] ?? "0") ?? 0
            try fill(length)
            content = Array(unread[..<length])
            unread.removeFirst(length)
        }
        return BenchHTTPAnswer(status: status, headers: fields, body: content)
    }

    private func transmit(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
            guard sent > 0 else { throw CLIError("send failed: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads until `unread` holds `marker`; returns where it starts.
    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if unread.count >= marker.count {
                for start in searchFrom...(unread.count - marker.count)
                where unread[start..<(start + marker.count)].elementsEqual(marker) {
                    return start
                }
                searchFrom = unread.count - marker.count + 1
            }
            try receive()
        }
    }

    /// Reads until `unread` holds at least `count` bytes.
    private func fill(_ count: Int) throws {
        while unread.count < count { try receive() }
    }

    private func receive() throws {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { throw CLIError("the server closed the connection or timed out (errno \(errno))") }
        unread += buffer[..<count]
    }
}
