public import Foundation
import GotchuAPI

/// Checks a client's way to the ledger the way an operator would, one finding per question, each with its fix:
/// is the server reachable, is its TLS certificate valid, is the clock close to the server's, is the token accepted.
public enum LedgerDoctor {
    /// One answer.
    public struct Finding: Sendable, Hashable {
        /// How bad it is.
        public enum Severity: Int, Sendable, Comparable {
            /// `ok`: nothing to do; `warning`: works, but worth fixing; `problem`: stops the client from working.
            /// Ordered from least to most serious.
            case ok, warning, problem
            public static func < (lhs: Severity, rhs: Severity) -> Bool { lhs.rawValue < rhs.rawValue }
        }

        /// What was checked: `reachable`, `tls`, `clock`, `credentials`.
        public var check: String
        /// How bad it is.
        public var severity: Severity
        /// What was found, and for anything but `ok` what to do about it.
        public var text: String
    }

    /// Clock differences up to this are reported as fine.
    public static let allowedSkew: TimeInterval = 30

    /// Runs every check against `client`'s server; `now` is this machine's clock.
    public static func examine(_ client: LedgerClient, now: @Sendable () -> Date = Date.init) async -> [Finding] {
        var findings: [Finding] = []
        let url = client.baseURL.absoluteString
        let https = client.baseURL.scheme?.lowercased() == "https"
        let health: (health: HealthResponse, serverDate: Date?)
        do {
            health = try await client.healthAndDate()
        } catch {
            let reason = error.description
            if https, reason.contains("TLS certificate") {
                findings.append(Finding(check: "reachable", severity: .ok, text: "\(url) accepts connections"))
                let fix =
                    client.trust == nil
                    ? "if a private CA signed it, pass --ca-file with that CA's certificate"
                    : "renew the server's certificate, or pass the CA that signed it with --ca-file"
                findings.append(Finding(check: "tls", severity: .problem, text: "\(reason); fix: \(fix)"))
            } else {
                findings.append(
                    Finding(
                        check: "reachable",
                        severity: .problem,
                        text: "\(url) is not reachable: \(reason); fix: check --server (or $GOTCHU_SERVER), that "
                            + "`gotchu server` runs there, and the network or firewall between"
                    )
                )
            }
            return findings
        }
        findings.append(
            Finding(check: "reachable", severity: .ok, text: "\(url) answers (health: \(health.health.status))")
        )
        if https {
            let trusted = client.trust.map { "the CA in \($0.caFile.path)" } ?? "the system's CAs"
            findings.append(
                Finding(check: "tls", severity: .ok, text: "the certificate is valid and trusted by \(trusted)")
            )
        } else {
            findings.append(
                Finding(
                    check: "tls",
                    severity: .warning,
                    text: "plain HTTP: tokens and amounts cross the network in clear; fix: serve HTTPS "
                        + "(gotchu server --tls-cert/--tls-key, or a TLS proxy) and use an https:// --server"
                )
            )
        }
        if let serverDate = health.serverDate {
            let skew = now().timeIntervalSince(serverDate)
            let seconds = Int(skew.rounded())
            if abs(skew) <= allowedSkew {
                findings.append(
                    Finding(
                        check: "clock",
                        severity: .ok,
                        text: "this clock is within \(abs(seconds)) s of the server's"
                    )
                )
            } else {
                let direction = skew > 0 ? "ahead of" : "behind"
                findings.append(
                    Finding(
                        check: "clock",
                        severity: .warning,
                        text: "this clock is \(abs(seconds)) s \(direction) the server's, so tokens and sessions "
                            + "seem to expire early or late; fix: synchronize the clocks (timedatectl set-ntp true)"
                    )
                )
            }
        } else {
            findings.append(
                Finding(
                    check: "clock",
                    severity: .warning,
                    text: "the server sent no readable Date header, so the clocks cannot be compared; fix: check "
                        + "that --server names a gotchu ledger, not a proxy that strips headers"
                )
            )
        }
        findings.append(await credentials(client))
        return findings
    }

    private static func credentials(_ client: LedgerClient) async -> Finding {
        let login = "gotchu login --email you@example.com --server \(client.baseURL.absoluteString)"
        guard client.token != nil else {
            return Finding(check: "credentials", severity: .warning, text: "not logged in; fix: \(login)")
        }
        do {
            _ = try await client.wallet()
            return Finding(check: "credentials", severity: .ok, text: "the ledger accepts the cached token")
        } catch  where error.problemKind == .unauthorized {
            return Finding(
                check: "credentials",
                severity: .problem,
                text: "the ledger refuses the cached token (expired, or issued under another secret); fix: \(login)"
            )
        } catch {
            return Finding(
                check: "credentials",
                severity: .problem,
                text: "the token could not be checked: \(error); fix: run gotchu doctor again, then \(login)"
            )
        }
    }
}
