import Foundation
import GotchuAPI
import GotchuCore
import GotchuQR
import HTTPTypes
import Hummingbird
package import Logging
import NIOCore
import ServiceLifecycle

/// The customer display: a small web server for the screen facing the customer, which a browser in kiosk mode
/// shows full screen.
///
/// - `GET /`: the page, rendered with the current status and then kept current by its script.
/// - `GET /events`: server-sent events, one `data:` line of ``KioskStatus`` JSON per change (the first is the
///   current status) with the page's texts for it under `display`, and a comment every `keepAliveInterval` so idle
///   connections stay open and a departed browser is noticed.
/// - `GET /status`: the current status as JSON.
/// - `GET /display.css`, `GET /display.js`: the page's style sheet and script.
/// - `GET /qr.svg?eid=EID`: while a payer may pay and the ledger has a web checkout, the QR code of that EID's
///   checkout as an SVG image, if `EID` is the one on the air; 404 otherwise.
/// - `GET /metrics`: with ``KioskMetrics``, the kiosk's metrics in the Prometheus text format.
///
/// Other paths answer 404, other methods 405. Run it on its own or in a `ServiceGroup`; a graceful shutdown ends
/// the open event streams so the server can stop.
package struct KioskDisplay: Service {
    private let source: any KioskStatusSource
    private let host: String
    private let port: Int
    private let keepAliveInterval: Duration
    private let metrics: KioskMetrics?
    private let logger: Logger
    private let onListening: @Sendable (Int) async -> Void

    /// Creates the display over `source`.
    /// - Parameters:
    ///   - source: the kiosk, or a stand-in.
    ///   - host: the address to listen on; `127.0.0.1` when the browser runs on the kiosk itself.
    ///   - port: the port to listen on; 0 picks a free one (see `onListening`).
    ///   - keepAliveInterval: how often an idle event stream gets a comment.
    ///   - metrics: follows the status into these metrics and serves them at `GET /metrics`; none when `nil`.
    ///   - logger: where the server logs.
    ///   - onListening: called with the bound port once the server accepts connections.
    package init(
        source: any KioskStatusSource,
        host: String,
        port: Int,
        keepAliveInterval: Duration = .seconds(15),
        metrics: KioskMetrics? = nil,
        logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.source = source
        self.host = host
        self.port = port
        self.keepAliveInterval = keepAliveInterval
        self.metrics = metrics
        self.logger = logger
        self.onListening = onListening
    }

    /// Serves until cancelled or shut down gracefully.
    package func run() async throws {
        let port = self.port
        let onListening = self.onListening
        let application = Application(
            router: router(),
            configuration: .init(address: .hostname(host, port: port), serverName: "gotchu-kiosk-display"),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? port) },
            logger: logger
        )
        guard let metrics else { return try await application.run() }
        let source = self.source
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { await metrics.observe(source) }
            try await application.run()
            // The server has stopped: so do the metrics.
            tasks.cancelAll()
        }
    }

    private func router() -> Router<BasicRequestContext> {
        let source = self.source
        let keepAliveInterval = self.keepAliveInterval
        let router = Router()
        let paths: Set<String> =
            metrics == nil
            ? Self.paths : Self.paths.union(["/metrics"])
        router.add(middleware: GetOnlyMiddleware(paths: paths))
        if let metrics {
            router.get("/metrics") { _, _ in
                var headers = HTTPFields()
                headers[.contentType] = KioskMetrics.contentType
                headers[.cacheControl] = "no-store"
                return Response(
                    status: .ok,
                    headers: headers,
                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition()))
                )
            }
        }
        router.get("/") { _, _ in
            var headers = Self.securityHeaders
            headers[.contentType] = "text/html; charset=utf-8"
            headers[.cacheControl] = "no-store"
            let page = KioskDisplayPage.html(for: await source.status())
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
        }
        for (path, asset) in KioskDisplayPage.assets {
            router.get(RouterPath(path)) { _, _ in
                var headers = Self.securityHeaders
                headers[.contentType] = asset.mediaType
                // They change only with the kiosk's version; the screen keeps them for an hour.
                headers[.cacheControl] = "max-age=3600"
                return Response(
                    status: .ok,
                    headers: headers,
                    body: ResponseBody(byteBuffer: ByteBuffer(string: asset.text))
                )
            }
        }
        router.get("/status") { _, _ in
            var headers = Self.securityHeaders
            headers[.contentType] = "application/json"
            headers[.cacheControl] = "no-store"
            let body = try APIJSON.encoder().encode(await source.status().forDisplay)
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
        }
        router.get("/qr.svg") { request, _ in
            let status = await source.status()
            guard let url = KioskDisplayPage.checkoutURL(of: status),
                let eid = status.charge?.eid, request.uri.queryParameters.get("eid") == eid.rawValue,
                let code = try? QRCode(encoding: url, correction: .medium)
            else {
                var headers = Self.securityHeaders
                headers[.contentType] = "text/plain; charset=utf-8"
                headers[.cacheControl] = "no-store"
                return Response(
                    status: .notFound,
                    headers: headers,
                    body: ResponseBody(byteBuffer: ByteBuffer(string: "no QR code for this EID now\n"))
                )
            }
            var headers = Self.securityHeaders
            headers[.contentType] = "image/svg+xml"
            headers[.cacheControl] = "no-store"
            headers[.contentSecurityPolicy] = "default-src 'none'; frame-ancestors 'none'"
            let svg = code.svg(title: KioskDisplayPage.qrCodeText)
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: svg)))
        }
        router.get("/events") { _, _ in
            var headers = Self.securityHeaders
            headers[.contentType] = "text/event-stream; charset=utf-8"
            headers[.cacheControl] = "no-cache"
            // Asks a reverse proxy (nginx) not to hold events back in its buffer.
            headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
            let stream = KioskEventStream(source: source, keepAliveInterval: keepAliveInterval)
            return Response(
                status: .ok,
                headers: headers,
                body: ResponseBody { writer in try await stream.run(&writer) }
            )
        }
        return router
    }

    /// The paths the display serves (with ``KioskMetrics``, `/metrics` too).
    private static let paths: Set<String> = Set(["/", "/events", "/status", "/qr.svg"]).union(
        KioskDisplayPage.assets.keys
    )

    /// The page's script and style come from this server and it talks only to this server; the policy allows
    /// nothing else, no inline script or style among it.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        + "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    private static var securityHeaders: HTTPFields {
        var headers = HTTPFields()
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return headers
    }
}

/// Answers 405 (with `Allow: GET`) for any method but GET on the display's paths; unknown paths stay 404.
struct GetOnlyMiddleware<Context: RequestContext>: RouterMiddleware {
    let paths: Set<String>

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard request.method != .get, paths.contains(request.uri.path) else { return try await next(request, context) }
        var headers = HTTPFields()
        headers[.allow] = "GET"
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(
            status: .methodNotAllowed,
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(string: "this path serves GET only\n"))
        )
    }
}
