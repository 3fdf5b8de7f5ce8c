import Foundation
import GotchuAPI
import GotchuLedgerAPI
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1

/// Answers every error a route throws as an RFC 9457 `application/problem+json` response, and writes one log line per
/// request: method, route, status and latency. Bodies, headers and tokens are never logged. A request whose client
/// hung up or stalled before its body arrived is logged as abandoned, with the reason, at info level: that is the
/// client's doing, not a server failure.
///
/// The answers are Hummingbird's `HTTPResponseError`s and render themselves (``HTTPProblem``, a rate limit's
/// refusal, a 405 with `Allow`); this middleware maps what Hummingbird cannot know: a ``GotchuAPI/Problem`` (whose
/// module does not know Hummingbird), the ledger's refusals, invalid fields, Hummingbird's own errors (a 404 in our
/// format), a body that broke off or stalled, and anything unexpected (logged, 500). It answers rather than rethrows, so an auto-generated HEAD endpoint still
/// strips the body of an error answer.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Logs a store outage when it begins and when it ends.
    var outage = StoreOutage()

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws
        -> Response
    {
        let start = ContinuousClock.now
        var response: Response
        /// Why the request never fully arrived, if it did not.
        var abandoned: String?
        do {
            response = try await next(request, context)
        } catch is RequestReadTimeout {
            // The connection is already closing; the answer is for a client that only half-closed.
            abandoned = "read timeout"
            response = Problem(.badRequest, detail: "the request did not arrive in time").httpResponse
            response.headers[.connection] = "close"
        } catch let parserError as HTTPParserError {
            // The body ended early (the client hung up) or broke the framing; either way nothing more can be read.
            let detail: String
            if parserError == .invalidEOFState {
                abandoned = "client disconnected"
                detail = "the connection ended before the request did"
            } else {
                detail = "the request body is not valid HTTP/1.1 (\(parserError))"
            }
            response = Problem(.badRequest, detail: detail).httpResponse
            response.headers[.connection] = "close"
        } catch {
            if let refusal = error as? LedgerError, StoreOutage.isOutage(refusal) {
                outage.failed(refusal, logger: context.logger)
            }
            response = try Self.answer(for: error, logger: context.logger).response(from: request, context: context)
        }
        // A write answered (every such route writes to the store): the store takes writes again.
        if request.method != .get, request.method != .head, (200..<300).contains(response.status.code) {
            outage.recovered(logger: context.logger)
        }
        let elapsed = ContinuousClock.now - start
        // Built only when the line is written: a server logging at warning pays nothing for it.
        func metadata() -> Logger.Metadata {
            var metadata: Logger.Metadata = [
                "method": "\(request.method.rawValue)",
                "route": "\(context.endpointPath ?? "-")",
                "latency_ms": "\(elapsed.millisecondsText)",
            ]
            if let abandoned {
                metadata["reason"] = "\(abandoned)"
            } else {
                metadata["status"] = "\(response.status.code)"
            }
            return metadata
        }
        context.logger.info(abandoned == nil ? "request" : "request abandoned", metadata: metadata())
        return response
    }

    /// How the ledger answers `error`: itself if it is one of the ledger's `HTTPResponseError`s, else the problem it
    /// maps to. An error nobody expected is logged and answered with 500.
    static func answer(for error: any Error, logger: Logger) -> any HTTPResponseError {
        switch error {
        case let httpError as HTTPError:
            // Hummingbird's own, in its own format: the router's 404, a missing route parameter.
            switch httpError.status.code {
            case 404: return HTTPProblem(Problem(.notFound, detail: "no such route"))
            case 405: return HTTPProblem(Problem(.methodNotAllowed))
            case 413: return HTTPProblem(Problem(.bodyTooLarge, detail: "request bodies are limited to 16 KiB"))
            case 400..<500: return HTTPProblem(Problem(.badRequest, detail: httpError.body))
            default: return HTTPProblem(Problem(.internalError))
            }
        case let answer as any HTTPResponseError:
            return answer
        case let problem as Problem:
            return HTTPProblem(problem)
        case let refusal as LedgerError:
            return HTTPProblem(Problem(refusal))
        case let invalid as InvalidField:
            return HTTPProblem(Problem(invalid.isAmount ? .invalidAmount : .badRequest, detail: invalid.description))
        default:
            logger.error("unexpected error", metadata: ["error": "\(String(reflecting: error))"])
            return HTTPProblem(Problem(.internalError, detail: "the server failed; the request may be retried"))
        }
    }
}

/// A ``GotchuAPI/Problem`` as Hummingbird answers it: its status, `application/problem+json`, `Retry-After` when its
/// kind says when to come back, and any headers of its own (`Allow`, a rate limit's `Retry-After`). ``GotchuAPI`` holds
/// the wire type and must not know Hummingbird, so the conformance is this wrapper's.
struct HTTPProblem: HTTPResponseError {
    var problem: Problem
    /// Headers beyond those of every problem; each replaces a header of the same name.
    var headers: HTTPFields

    init(_ problem: Problem, headers: HTTPFields = [:]) {
        self.problem = problem
        self.headers = headers
    }

    var status: HTTPResponse.Status { HTTPResponse.Status(code: problem.status) }

    func response(from request: Request, context: some RequestContext) -> Response { response }

    /// The problem+json response, where no request is at hand.
    var response: Response {
        var fields = HTTPFields()
        fields[.contentType] = Problem.mediaType
        if let seconds = problem.kind?.retryAfterSeconds {
            fields[.retryAfter] = String(seconds)
        }
        for field in headers { fields[field.name] = field.value }
        let body = (try? APIJSON.encoder().encode(problem)) ?? Data()
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }
}

extension Problem {
    /// The problem+json response of this problem.
    var httpResponse: Response { HTTPProblem(self).response }
}

extension RateLimiter.Exceeded: HTTPResponseError {
    var status: HTTPResponse.Status { .tooManyRequests }

    /// `rate-limited`, with `Retry-After` saying when the limit lets the client through again.
    func response(from request: Request, context: some RequestContext) -> Response {
        HTTPProblem(
            Problem(.rateLimited, detail: "too many requests; retry in \(retryAfter) s"),
            headers: [.retryAfter: String(retryAfter)]
        ).response
    }
}

extension MethodNotAllowed: HTTPResponseError {
    var status: HTTPResponse.Status { .methodNotAllowed }

    /// `method-not-allowed`, with `Allow` naming what the path serves.
    func response(from request: Request, context: some RequestContext) -> Response {
        HTTPProblem(
            Problem(.methodNotAllowed, detail: "this path serves \(allowHeader) only"),
            headers: [.allow: allowHeader]
        ).response
    }
}

extension Duration {
    /// In milliseconds with two decimals ("12.34"), for logs; cheaper than Foundation's formatter, as it runs for every
    /// request. Negative and absurd durations are clamped.
    var millisecondsText: String {
        let (seconds, attoseconds) = components
        // Hundredths of a millisecond are 10¹³ attoseconds; rounded to the nearest.
        let hundredths =
            min(max(seconds, 0), 1_000_000_000) * 100_000 + (max(attoseconds, 0) + 5_000_000_000_000)
            / 10_000_000_000_000
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}
