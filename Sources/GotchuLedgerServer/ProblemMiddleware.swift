import Foundation
import GotchuAPI
import Hummingbird
import Logging

/// Turns every error into an RFC 9457 `application/problem+json` response, and writes one log line per request:
/// method, route, status and latency. Bodies, headers and tokens are never logged.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        let start = ContinuousClock.now
        let response: Response
        do {
            response = try await next(request, context)
        } catch let exceeded as RateLimiter.Exceeded {
            var refused = Self.problemResponse(
                for: Problem(.rateLimited, detail: "too many requests; retry in \(exceeded.retryAfter) s")
            )
            refused.headers[.retryAfter] = String(exceeded.retryAfter)
            response = refused
        } catch let refused as MethodNotAllowed {
            var problem = Self.problemResponse(
                for: Problem(.methodNotAllowed, detail: "this path serves \(refused.allowed.rawValue) only")
            )
            problem.headers[.allow] = refused.allowed.rawValue
            response = problem
        } catch {
            response = Self.problemResponse(for: Self.problem(for: error, logger: context.logger))
        }
        let elapsed = ContinuousClock.now - start
        context.logger.info(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)",
                "route": "\(context.endpointPath ?? "-")",
                "status": "\(response.status.code)",
                "latency_ms": "\(String(format: "%.2f", elapsed / .milliseconds(1)))",
            ]
        )
        return response
    }

    static func problem(for error: any Error, logger: Logger) -> Problem {
        switch error {
        case let problem as Problem:
            return problem
        case let invalid as InvalidField:
            return Problem(invalid.isAmount ? .invalidAmount : .badRequest, detail: invalid.description)
        case let httpError as HTTPError:
            switch httpError.status.code {
            case 404: return Problem(.notFound, detail: "no such route")
            case 405: return Problem(.methodNotAllowed)
            case 413: return Problem(.bodyTooLarge, detail: "request bodies are limited to 16 KiB")
            case 400..<500: return Problem(.badRequest, detail: httpError.body)
            default: return Problem(.internalError)
            }
        default:
            logger.error("unexpected error", metadata: ["error": "\(String(reflecting: error))"])
            return Problem(.internalError, detail: "the server failed; the request may be retried")
        }
    }

    static func problemResponse(for problem: Problem) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = Problem.mediaType
        let body = (try? APIJSON.encoder().encode(problem)) ?? Data()
        return Response(
            status: HTTPResponse.Status(code: problem.status),
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}
