import ArgumentParser
import Foundation
import GotchuLedgerClient
import GotchuLedgerSQLite
import GotchuLedgerServer

struct BenchLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Password logins per second over HTTP at a bcrypt cost, and bcrypt checks per second alone.",
        discussion: """
            A ledger on a fresh SQLite file serves POST /auth/login on a loopback port (no rate limits); \
            -k clients log in concurrently, each as its own account, --logins times in all. Each login is \
            one bcrypt check, so the rate is bounded by the cores: it shows what a cost costs.
            """
    )

    @Option(help: ArgumentHelp("bcrypt cost (\(Passwords.allowedCosts)).", valueName: "cost"))
    var bcryptCost = Passwords.defaultCost

    @Option(name: .customShort("k"), help: "Concurrent clients.")
    var clients = 4

    @Option(help: "Logins in all.")
    var logins = 40

    func validate() throws {
        guard Passwords.allowedCosts.contains(bcryptCost) else {
            throw ValidationError("--bcrypt-cost must be \(Passwords.allowedCosts), got \(bcryptCost)")
        }
        guard (1...256).contains(clients), (1...100_000).contains(logins) else {
            throw ValidationError("-k must be 1...256 and --logins 1...100000")
        }
    }

    func run() async throws {
        let clients = self.clients
        let logins = self.logins
        let password = "benchmark password"
        var policy = LedgerPolicy()
        policy.passwordCost = bcryptCost
        print("login benchmark: bcrypt cost \(bcryptCost), \(clients) clients, \(logins) logins")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gotchu-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteLedgerStore(path: directory.appendingPathComponent("ledger.sqlite").path, policy: policy)
        try await store.migrate()
        for client in 0..<clients {
            _ = try await store.addUser(
                email: "bench\(client)@example.com",
                displayName: nil,
                password: password,
                actor: "bench"
            )
        }
        let hash = await Passwords.hash(password, cost: bcryptCost)
        let checkStart = ContinuousClock.now
        let checks = max(4, logins / 4)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in 0..<clients {
                group.addTask {
                    for _ in stride(from: client, to: checks, by: clients) {
                        guard await Passwords.verify(password, hash: hash) else { throw CLIError("bcrypt failed") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let checkSeconds = (ContinuousClock.now - checkStart) / .seconds(1)
        print(
            String(
                format: "bcrypt checks alone:    %8.1f per second (%d in %.2f s)",
                Double(checks) / checkSeconds,
                checks,
                checkSeconds
            )
        )
        let tokens = try await TokenAuthority(secret: UUID().uuidString + UUID().uuidString)
        let seconds = try await LedgerServer.withRunning(
            store: store,
            .inProcess(tokens: tokens) { $0.developmentMode = false }
        ) { url in
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<clients {
                    group.addTask {
                        let ledger = LedgerClient(baseURL: url, timeout: 120)
                        for _ in stride(from: client, to: logins, by: clients) {
                            _ = try await ledger.login(email: "bench\(client)@example.com", password: password)
                        }
                    }
                }
                try await group.waitForAll()
            }
            return (ContinuousClock.now - start) / .seconds(1)
        }
        print(
            String(
                format: "logins over HTTP:       %8.1f per second (%d in %.2f s)",
                Double(logins) / seconds,
                logins,
                seconds
            )
        )
    }
}
