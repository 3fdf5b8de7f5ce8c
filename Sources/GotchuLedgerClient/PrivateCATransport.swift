import AsyncHTTPClient
public import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The CA certificates a client trusts for the ledger instead of the system's: for a ledger whose certificate comes
/// from a private CA. URLSession on Linux cannot take such a CA, so these requests go through AsyncHTTPClient.
public struct LedgerTrust: Sendable {
    /// The PEM file the certificates were read from.
    public let caFile: URL
    let client: HTTPClient
    private let certificates: [NIOSSLCertificate]

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
        self.client = Self.client(for: caFile.path, certificates: certificates)
    }

    /// One HTTP client per CA file, for the life of the process: clients keep connections alive between requests,
    /// and an AsyncHTTPClient must not be dropped without a shutdown no caller would remember to do.
    private static let clients = Mutex<[String: HTTPClient]>([:])

    private static func client(for path: String, certificates: [NIOSSLCertificate]) -> HTTPClient {
        clients.withLock { clients in
            if let client = clients[path] { return client }
            var tls = TLSConfiguration.makeClientConfiguration()
            // Only the private CA: a certificate from any other issuer is refused.
            tls.trustRoots = .certificates(certificates)
            tls.certificateVerification = .fullVerification
            let client = HTTPClient(
                eventLoopGroup: HTTPClient.defaultEventLoopGroup,
                // A bearer token must not follow a redirect to another origin.
                configuration: .init(tlsConfiguration: tls, redirectConfiguration: .disallow)
            )
            clients[path] = client
            return client
        }
    }

    /// Sends `request`; the response body is read up to `maximumBody` bytes.
    func perform(
        _ request: URLRequest,
        timeout: TimeInterval,
        maximumBody: Int = 4 << 20
    ) async throws
        -> (Data, HTTPURLResponse)
    {
        guard let url = request.url else { throw LedgerClientError.invalidURL("") }
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
        for (name, value) in request.allHTTPHeaderFields ?? [:] { outgoing.headers.add(name: name, value: value) }
        if let body = request.httpBody { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(outgoing, timeout: .milliseconds(Int64(timeout * 1000)))
        let body = try await response.body.collect(upTo: maximumBody)
        var fields: [String: String] = [:]
        for header in response.headers { fields[header.name] = header.value }
        guard
            let http = HTTPURLResponse(
                url: url,
                statusCode: Int(response.status.code),
                httpVersion: "HTTP/1.1",
                headerFields: fields
            )
        else { throw LedgerClientError.transport("not an HTTP response") }
        return (Data(body.readableBytesView), http)
    }

    /// A transport failure of a request to `url` in words, saying when the server's certificate was the cause and,
    /// when it can tell, why.
    func describe(_ error: any Error, url: URL) async -> String {
        if error is NIOSSLError || error is BoringSSLError || "\(error)".contains("CERTIFICATE_VERIFY_FAILED") {
            let host = url.host ?? ""
            let reason: String
            switch await CertificateProbe.validity(host: host, port: url.port ?? 443, roots: certificates) {
            case .expired(let date): reason = "it expired on \(date)"
            case .notYetValid(let date): reason = "it is not valid before \(date)"
            case nil:
                reason = "it is not signed by the CA in \(caFile.path), or it does not name \(host)"
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
