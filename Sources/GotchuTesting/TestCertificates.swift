package import Foundation

/// A private CA and certificates it signed, made with Debian's `openssl` in a fresh directory: for tests of HTTPS
/// between the ledger and its clients. Every certificate names `127.0.0.1` and `localhost`.
package struct TestCertificates: Sendable {
    /// The directory holding every file.
    package let directory: URL

    /// The CA's certificate (PEM), to pass as a client's CA file.
    package var caFile: URL { directory.appendingPathComponent("ca.pem") }
    /// The server's certificate (PEM), valid from an hour ago for a day, signed by the CA.
    package var serverCertificate: URL { directory.appendingPathComponent("server.pem") }
    /// The server's private key (PEM).
    package var serverKey: URL { directory.appendingPathComponent("server.key") }
    /// A certificate for the same key and names, signed by the CA, that expired yesterday.
    package var expiredCertificate: URL { directory.appendingPathComponent("expired.pem") }
    /// Another CA's certificate, which signed none of these.
    package var otherCAFile: URL { directory.appendingPathComponent("other-ca.pem") }
    /// A private key that belongs to no certificate here.
    package var otherKey: URL { directory.appendingPathComponent("other.key") }

    /// Makes the CA, the certificates and the keys in a new directory under `parent`.
    package init(in parent: URL) throws {
        directory = parent.appendingPathComponent("tls")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for name in ["ca", "other-ca"] {
            try openssl(
                ["req", "-x509"] + curve
                    + [
                        "-keyout", "\(name).key", "-out", "\(name).pem", "-days", "2", "-subj",
                        "/CN=Gotchu test \(name)",
                    ]
            )
        }
        try openssl(["req"] + curve + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"])
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "other.key"])
        try Data("subjectAltName=IP:127.0.0.1,DNS:localhost\n".utf8).write(to: directory.appendingPathComponent("san"))
        // `-days -1` ends the certificate a day before it starts: expired from the moment it is made.
        for (name, days) in [("server", "1"), ("expired", "-1")] {
            try openssl([
                "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial",
                name == "server" ? "1" : "2", "-days", days, "-extfile", "san", "-out", "\(name).pem",
            ])
        }
    }

    /// Deletes every file.
    package func remove() { try? FileManager.default.removeItem(at: directory) }

    private func openssl(_ arguments: [String]) throws {
        let process = try SpawnedProcess(
            executable: "/usr/bin/openssl",
            arguments: arguments,
            directory: directory,
            error: .pipe
        )
        let output = process.error?.readToEnd() ?? Data()
        guard process.waitUntilExit() == 0 else {
            throw TestCertificatesError(
                "openssl \(arguments.joined(separator: " ")) failed: \(String(decoding: output, as: UTF8.self))"
            )
        }
    }
}

/// `openssl` failed while making test certificates.
package struct TestCertificatesError: Error, CustomStringConvertible {
    /// What failed, with openssl's output.
    package var description: String

    init(_ description: String) { self.description = description }
}
