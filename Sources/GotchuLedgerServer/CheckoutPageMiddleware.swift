import GotchuAPI
import GotchuCheckout
import HTTPTypes
import Hummingbird

/// Gives every answer under `/p/` the checkout's security headers (``CheckoutHTML/securityHeaders``, where the route
/// set none of its own; HSTS behind an `https` public address), and answers an error that reaches it (a page that does
/// not exist, 404; a method its path does not serve, 405 with `Allow`) with the checkout's page for a browser, and
/// with problem+json for a client that does not ask for HTML (an API client, a script), with the same headers.
struct CheckoutPageMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    /// The store outage in progress, told of a database failure answered here.
    var outage = StoreOutage()
    /// Whether answers carry ``CheckoutHTML/strictTransportSecurity``: the checkout's public address is `https`.
    var strictTransport = false
    /// How long a payer's hold on a session lasts, which the pages of a held session name.
    var lockLifetime: Duration

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

    /// The answer to an error a route under `/p/` (or the router) threw: the one answer every route group gives,
    /// as the checkout's page for a browser and as problem+json for any other client.
    private func answer(_ error: any Error, _ request: Request, _ context: Context) -> Response {
        let answer = HTTPProblem(answering: error, logger: context.logger, outage: outage)
        guard acceptsHTML(request) else { return answer.response }
        // Relative, as every page's links are: what leads from this address back to `/p/`.
        let depth = request.uri.path.split(separator: "/", omittingEmptySubsequences: false).count - 3
        let root = String(repeating: "../", count: max(0, depth))
        return CheckoutProblemPage(answer: answer, lockLifetime: lockLifetime).response(root: root, eid: nil)
    }

    /// Whether the client asks for HTML (a browser's navigation does).
    private func acceptsHTML(_ request: Request) -> Bool {
        request.headers[values: .accept].contains { $0.contains("text/html") }
    }
}
