import HTTPTypes
import Hummingbird

/// A method the path does not serve; answered with 405 and `Allow`.
struct MethodNotAllowed: Error {
    /// The methods the path serves, in the route table's order.
    var allowed: [HTTPRequest.Method]

    /// The `Allow` value: the path's methods, a GET path's with HEAD after it (the router derives it from GET).
    var allowHeader: String {
        allowed.flatMap { $0 == .get ? ["GET", "HEAD"] : [$0.rawValue] }.joined(separator: ", ")
    }
}

/// Turns the router's 404 for a known path asked with another method (any method, including ones it has never
/// heard of) into 405 with `Allow`, so a client can tell a wrong method from a wrong path.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Path templates (`{name}` matches one segment) and the method each serves; a path served with several methods
    /// is listed once per method.
    let paths: [(String, HTTPRequest.Method)]

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let segments = request.uri.path.split(separator: "/", omittingEmptySubsequences: false)
            // The templates the path matches with the most literal segments, as the router prefers them
            // (`/sessions/lock` over `/sessions/{sid}`), and every method they serve.
            var allowed: [HTTPRequest.Method] = []
            var literals = -1
            for (template, method) in paths where method != request.method {
                let parts = template.split(separator: "/", omittingEmptySubsequences: false)
                guard parts.count == segments.count else { continue }
                let matches = zip(parts, segments).allSatisfy { part, segment in
                    part.hasPrefix("{") ? !segment.isEmpty : part == segment
                }
                guard matches else { continue }
                let count = parts.filter { !$0.hasPrefix("{") }.count
                if count > literals { (allowed, literals) = ([], count) }
                if count == literals, !allowed.contains(method) { allowed.append(method) }
            }
            if !allowed.isEmpty { throw MethodNotAllowed(allowed: allowed) }
            throw error
        }
    }
}
