import HTTPTypes
import Hummingbird

/// A method the path does not serve; answered with 405 and `Allow`.
struct MethodNotAllowed: Error {
    var allowed: HTTPRequest.Method

    /// The `Allow` value: a GET path also answers HEAD (the router derives it from GET).
    var allowHeader: String { allowed == .get ? "GET, HEAD" : allowed.rawValue }
}

/// Turns the router's 404 for a known path asked with another method (any method, including ones it has never
/// heard of) into 405 with `Allow`, so a client can tell a wrong method from a wrong path.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Path templates (`{name}` matches one segment) and the method each serves.
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
            for (template, method) in paths where method != request.method {
                let parts = template.split(separator: "/", omittingEmptySubsequences: false)
                guard parts.count == segments.count else { continue }
                let matches = zip(parts, segments).allSatisfy { part, segment in
                    part.hasPrefix("{") ? !segment.isEmpty : part == segment
                }
                if matches { throw MethodNotAllowed(allowed: method) }
            }
            throw error
        }
    }
}
