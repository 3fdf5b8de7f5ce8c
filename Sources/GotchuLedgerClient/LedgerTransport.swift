import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// The CA certificates a client trusts for the ledger instead of the system's: for a ledger whose certificate comes
/// from a private CA.
public struct LedgerTrust: Sendable {
    /// The PEM file the certificates were read from.
    public let caFile: URL
    let certificates: [NIOSSLCertificate]

    /// Reads the PEM certificates of `caFile`.
    /// - Throws: ``LedgerClientError/transport(_:)`` naming the file when it cannot be read or holds no certificate.
    public init(caFile: URL) throws(LedgerClientError) {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(caFile.path)
        } catch {
            throw .transport("cannot read the CA file \(caFile.path): \(error)")
        }
        guard !certificates.isEmpty else { throw .transport("the CA file \(caFile.path) holds no PEM certificate") }
        self.caFile = caFile
        self.certificates = certificates
    }
}

/// A response of the ledger: its status and header fields.
struct LedgerResponse: Sendable {
    let statusCode: Int
    let headers: HTTPHeaders

    func value(forHTTPHeaderField name: String) -> String? { headers.first(name: name) }
}

/// How every request reaches the ledger: AsyncHTTPClient, trusting the system's CAs or one private CA (a client
/// links no libcurl and no FoundationNetworking).
enum LedgerTransport {
    /// What an HTTP client is made for.
    struct Profile: Hashable {
        /// The private CA file trusted, or `nil` for the system's CAs.
        var caFile: String?
        /// How long the server may stay silent (connecting, or between bytes of its answer), in milliseconds; `nil`
        /// for no limit (an event stream, whose silence its reader judges).
        var silence: Int64?
        /// Connections opened to one server at most; requests beyond wait for one.
        var connections: Int
    }

    /// One HTTP client per profile, for the life of the process: clients keep connections alive between requests,
    /// and an AsyncHTTPClient must not be dropped without a shutdown no caller would remember to do.
    private static let clients = Mutex<[Profile: HTTPClient]>([:])

    /// The client for `trust` (the system's CAs when `nil`) that allows `silence` seconds of silence.
    static func client(_ trust: LedgerTrust?, silence: TimeInterval?, connections: Int) -> HTTPClient {
        let profile = Profile(
            caFile: trust?.caFile.path,
            silence: silence.map { Int64($0 * 1000) },
            connections: connections
        )
        return clients.withLock { clients in
            if let client = clients[profile] { return client }
            var tls = TLSConfiguration.makeClientConfiguration()
            if let trust {
                // Only the private CA: a certificate from any other issuer is refused.
                tls.trustRoots = .certificates(trust.certificates)
            }
            tls.certificateVerification = .fullVerification
            // A bearer token must not follow a redirect to another origin.
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow)
            configuration.timeout = .init(
                connect: .milliseconds(profile.silence ?? 10_000),
                read: profile.silence.map { .milliseconds($0) }
            )
            // A server that refuses the connection is reported at once, not tried again until the deadline. Idle
            // connections are closed before the server's idle timeout (30 s by default) would close them under a
            // request.
            configuration.connectionPool = .init(
                idleTimeout: .seconds(20),
                concurrentHTTP1ConnectionsPerHostSoftLimit: connections
            )
            configuration.connectionPool.retryConnectionEstablishment = false
            let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
            clients[profile] = client
            return client
        }
    }

    /// Sends `request` through the client for `trust`; the response body is read up to `maximumBody` bytes.
    ///
    /// `timeout` bounds the server's silence, as it did for URLSession: a request that waits for a free connection
    /// (many concurrent requests from one process), or whose answer keeps arriving, is bounded only by thirty times
    /// that, at least five minutes.
    static func perform(
        _ request: HTTPClientRequest,
        trust: LedgerTrust?,
        timeout: TimeInterval,
        connections: Int,
        maximumBody: Int = 4 << 20
    ) async throws -> (Data, LedgerResponse) {
        let client = client(trust, silence: timeout, connections: connections)
        let deadline = NIODeadline.now() + .milliseconds(Int64(max(timeout * 30, 300) * 1000))
        let response = try await client.execute(request, deadline: deadline)
        let body = try await response.body.collect(upTo: maximumBody)
        return (
            Data(body.readableBytesView),
            LedgerResponse(statusCode: Int(response.status.code), headers: response.headers)
        )
    }

    /// A transport failure of a request to `url` in words, saying when the server's certificate was the cause and,
    /// when it can tell, why.
    static func describe(_ error: any Error, url: URL, trust: LedgerTrust?) async -> String {
        if error is NIOSSLError || error is BoringSSLError || "\(error)".contains("CERTIFICATE_VERIFY_FAILED") {
            guard let trust else {
                return "the server's TLS certificate was refused (\(error)); for a certificate from a private CA, "
                    + "pass its CA file (--ca-file)"
            }
            let host = url.host ?? ""
            let reason: String
            switch await CertificateProbe.validity(host: host, port: url.port ?? 443, roots: trust.certificates) {
            case .expired(let date): reason = "it expired on \(date)"
            case .notYetValid(let date): reason = "it is not valid before \(date)"
            case nil:
                reason = "it is not signed by the CA in \(trust.caFile.path), or it does not name \(host)"
            }
            return "the server's TLS certificate was refused: \(reason) (\(error))"
        }
        if let error = error as? HTTPClientError,
            error == .deadlineExceeded || error == .connectTimeout || error == .readTimeout
        {
            return "the server did not answer in time"
        }
        if error is NIOConnectionError || error is IOError {
            return "cannot reach the server (\(error))"
        }
        return "\(error)"
    }
}

/// Looks at a server's certificate after a refused handshake: BoringSSL only says that verification failed, and an
/// operator needs to know whether the certificate has expired or comes from another CA.
enum CertificateProbe {
    enum Finding: Equatable {
        case expired(Date)
        case notYetValid(Date)
    }

    /// Connects once more, takes the server's certificate without trusting it, and closes; `nil` when its dates are
    /// fine or it cannot be had within a few seconds.
    static func validity(host: String, port: Int, roots: [NIOSSLCertificate]) async -> Finding? {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(roots)
        guard let context = try? NIOSSLContext(configuration: tls) else { return nil }
        let leaf = Mutex<NIOSSLCertificate?>(nil)
        // SNI takes a name, not an address.
        let serverName = host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) ? nil : host
        do {
            let channel = try await ClientBootstrap(group: HTTPClient.defaultEventLoopGroup)
                .connectTimeout(.seconds(5))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = try NIOSSLClientHandler(
                            context: context,
                            serverHostname: serverName,
                            customVerificationCallback: { presented, promise in
                                leaf.withLock { $0 = presented.first }
                                // Only looking: the handshake must not go on.
                                promise.succeed(.failed)
                            }
                        )
                        try channel.pipeline.syncOperations.addHandler(handler)
                    }
                }
                .connect(host: host, port: port).get()
            channel.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
            try? await channel.closeFuture.get()
        } catch {
            return nil
        }
        guard let certificate = leaf.withLock({ $0 }) else { return nil }
        let now = Date()
        let notAfter = Date(timeIntervalSince1970: TimeInterval(certificate.notValidAfter))
        let notBefore = Date(timeIntervalSince1970: TimeInterval(certificate.notValidBefore))
        if now > notAfter { return .expired(notAfter) }
        if now < notBefore { return .notYetValid(notBefore) }
        return nil
    }
}
