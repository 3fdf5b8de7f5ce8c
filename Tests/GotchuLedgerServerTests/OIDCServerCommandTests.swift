import Foundation
import GotchuTesting
import Testing

/// `gotchu server`'s settings of sign-in through the OpenID Connect issuer: the client id and the client secret.
@Suite("gotchu server --oidc-client-id and the client secret", .timeLimit(.minutes(5)))
struct OIDCServerCommandTests {
    @Test(
        "A confidential client from the command line and a secret file signs a browser in on the checkout",
        arguments: [false, true]
    )
    func confidentialClient(secretInVariable: Bool) async throws {
        let issuer = CodeFlowIssuer(
            key: try await IssuerKey.ec(kid: "e1"),
            clientID: "gotchu-web",
            clientSecret: "a s3cret: with : and &"
        )
        try await issuer.serve { issuerURL in
            let processes = try GotchuProcesses()
            defer { processes.remove() }
            let file = processes.directory.url.appendingPathComponent("oidc-client-secret")
            try Data("a s3cret: with : and &\n".utf8).write(to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
            let options = [
                "--oidc-issuer", issuerURL, "--oidc-audience", "gotchu", "--oidc-client-id", "gotchu-web",
            ]
            let server: RunningCommand
            let url: String
            if secretInVariable {
                let database = processes.directory.url.appendingPathComponent("ledger.sqlite").path
                server = try processes.start(
                    ["server", "--dev", "--port", "0", "--database", database] + options,
                    user: "server",
                    extra: ["GOTCHU_SERVER_OIDC_CLIENT_SECRET": "a s3cret: with : and &"]
                )
                let line = try await server.waitForLine { $0.hasPrefix("listening on ") }
                url = String(line.dropFirst("listening on ".count))
            } else {
                (server, url) = try await processes.startServer(options + ["--oidc-client-secret-file", file.path])
            }
            defer { _ = try? server.stopNow() }
            try await TestBrowser.with { browser in
                let page = try await browser.get(url + "/p/0123456789")
                #expect(page.body.contains("id=\"oidc-signin\""))
                let start = try await browser.get(url + "/p/0123456789/sign-in/oidc")
                try #require(start.status == 303, "\(start.body)")
                #expect(queryItems(start.location)["client_id"] == "gotchu-web")
                let back = try await browser.get(try #require(start.location))
                let signedIn = try await browser.get(try #require(back.location))
                #expect(signedIn.status == 200, "\(signedIn.body)")
                #expect(browser.cookies["gotchu-session"] != nil)
                #expect(issuer.tokenForms.count == 1 && issuer.tokenForms.last?["client_secret"] == nil)
            }
        }
    }

    @Test(
        "Refused before the server starts: a client without an issuer, two secrets, a bad client id, a secret file every user may read",
        arguments: [
            (
                ["--oidc-client-id", "web"],
                "--oidc-client-id and the client secret are the issuer's: they need --oidc-issuer"
            ),
            (["--oidc-client-secret", "x"], "they need --oidc-issuer"),
            (
                [
                    "--oidc-issuer", "https://id.example.com", "--oidc-audience", "gotchu", "--oidc-client-secret", "x",
                    "--oidc-client-secret-file", "/nonexistent",
                ],
                "both --oidc-client-secret and --oidc-client-secret-file are set; set only one"
            ),
            (
                ["--oidc-issuer", "https://id.example.com", "--oidc-audience", "gotchu", "--oidc-client-id", "a b"],
                "--oidc-client-id: must be 1 to 255 visible ASCII characters"
            ),
            (
                [
                    "--oidc-issuer", "https://id.example.com", "--oidc-audience", "gotchu",
                    "--oidc-client-secret-file", "SECRET",
                ],
                "is readable by every user"
            ),
        ]
    )
    func refused(options: [String], message: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let secret = directory.url.appendingPathComponent("secret")
        try Data("s3cret\n".utf8).write(to: secret)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: secret.path)
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--dev", "--port", "0"] + options.map { $0 == "SECRET" ? secret.path : $0 },
            environment: ["XDG_DATA_HOME": directory.url.path]
        )
        #expect(try await server.waitForExit() != 0)
        #expect(server.standardError.contains(message), "\(server.standardError)")
        #expect(!server.standardError.contains("s3cret"))
    }

    @Test("The client secret is never read from the config file")
    func secretNotInConfigFile() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.url.appendingPathComponent("server.toml")
        try Data(
            """
            oidc_issuer = "https://id.example.com"
            oidc_audience = "gotchu"
            oidc_client_secret = "hunter2-hunter2"

            """.utf8
        ).write(to: file)
        let server = try RunningCommand(
            try BuiltProducts.gotchu,
            ["server", "--dev", "--port", "0", "--config", file.path],
            environment: ["XDG_DATA_HOME": directory.url.path]
        )
        #expect(try await server.waitForExit() != 0)
        #expect(
            server.standardError.contains("oidc_client_secret in \(file.path): is a secret"),
            "\(server.standardError)"
        )
        #expect(!server.standardError.contains("hunter2"))
    }
}
