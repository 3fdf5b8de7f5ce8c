import GotchuAPI
import GotchuCheckout
import HTTPTypes
import Hummingbird

/// Gives every answer under `/p/` the checkout's security headers (``CheckoutHTML/securityHeaders``, where the route
/// set none of its own; HSTS behind an `https` public address), and answers a browser's request for a page that does not exist there (404) or with a method
/// its path does not serve (405, with `Allow`) with an HTML page instead of problem+json. A client that does not ask
/// for HTML (an API client, a script) still gets problem+json, with the same headers.
struct CheckoutPageMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    /// The store outage in progress, told of a database failure answered here.
    var outage = StoreOutage()
    /// Whether answers carry ``CheckoutHTML/strictTransportSecurity``: the checkout's public address is `https`.
    var strictTransport = false

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard request.uri.path.hasPrefix("/p/") else { return try await next(request, context) }
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            response = answer(error, request, context)
        }
        for (name, value) in CheckoutHTML.securityHeaders where response.headers[name] == nil {
            response.headers[name] = value
        }
        if strictTransport {
            let (name, value) = CheckoutHTML.strictTransportSecurity
            response.headers[name] = value
        }
        return response
    }

    /// The answer to an error a route under `/p/` (or the router) threw.
    private func answer(_ error: any Error, _ request: Request, _ context: Context) -> Response {
        if acceptsHTML(request) {
            // Relative, as every page's links are: what leads from this address back to `/p/`.
            let depth = request.uri.path.split(separator: "/", omittingEmptySubsequences: false).count - 3
            let root = String(repeating: "../", count: max(0, depth))
            if let notAllowed = error as? MethodNotAllowed {
                let page = CheckoutPages.outcome(
                    "Not here",
                    "This address does not take that kind of request.",
                    root: root,
                    eid: nil
                )
                return CheckoutHTML.response(page, status: .methodNotAllowed, headers: [.allow: notAllowed.allowHeader])
            }
            if let httpError = error as? HTTPError, httpError.status == .notFound {
                let page = CheckoutPages.outcome("Not found", "There is nothing here.", root: root, eid: nil)
                return CheckoutHTML.response(page, status: .notFound)
            }
        }
        if let refusal = error as? LedgerError, StoreOutage.isOutage(refusal) {
            outage.failed(refusal, logger: context.logger)
        }
        do {
            return try ProblemMiddleware<Context>.answer(for: error, logger: context.logger)
                .response(from: request, context: context)
        } catch {
            return HTTPProblem(Problem(.internalError)).response
        }
    }

    /// Whether the client asks for HTML (a browser's navigation does).
    private func acceptsHTML(_ request: Request) -> Bool {
        request.headers[values: .accept].contains { $0.contains("text/html") }
    }
}
