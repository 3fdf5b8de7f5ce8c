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
    let client: HTTPClient
    fileprivate let certificates: [NIOSSLCertificate]

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
        self.client = LedgerTransport.client(for: caFile.path, trusting: certificates)
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
    /// One HTTP client per trust, for the life of the process: clients keep connections alive between requests,
    /// and an AsyncHTTPClient must not be dropped without a shutdown no caller would remember to do.
    private static let clients = Mutex<[String: HTTPClient]>([:])

    /// The client trusting the system's CAs.
    static var system: HTTPClient { client(for: "", trusting: nil) }

    /// The client for `trust`: the system's when `nil`.
    static func client(_ trust: LedgerTrust?) -> HTTPClient { trust?.client ?? system }

    fileprivate static func client(for key: String, trusting certificates: [NIOSSLCertificate]?) -> HTTPClient {
        clients.withLock { clients in
            if let client = clients[key] { return client }
            var tls = TLSConfiguration.makeClientConfiguration()
            if let certificates {
                // Only the private CA: a certificate from any other issuer is refused.
                tls.trustRoots = .certificates(certificates)
            }
            tls.certificateVerification = .fullVerification
            // A bearer token must not follow a redirect to another origin.
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls, redirectConfiguration: .disallow)
            // Idle connections are closed before the server's idle timeout (30 s by default) would close them under a
            // request; the pool grows to what concurrent callers (a benchmark's clients) need.
            configuration.connectionPool = .init(
                idleTimeout: .seconds(20),
                concurrentHTTP1ConnectionsPerHostSoftLimit: 128
            )
            let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
            clients[key] = client
            return client
        }
    }

    /// Sends `request` through the client for `trust`; the response body is read up to `maximumBody` bytes.
    static func perform(
        _ request: HTTPClientRequest,
        trust: LedgerTrust?,
        timeout: TimeInterval,
        maximumBody: Int = 4 << 20
    ) async throws -> (Data, LedgerResponse) {
        let response = try await client(trust).execute(request, timeout: .milliseconds(Int64(timeout * 1000)))
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
        if let error = error as? HTTPClientError, error == .deadlineExceeded || error == .connectTimeout {
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
