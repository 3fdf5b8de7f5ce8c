import Foundation
import GotchuAPI
import GotchuCheckout
import GotchuLedgerAPI
import GotchuOIDC
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
/// Every error is answered as ``HTTPProblem/init(answering:logger:outage:)`` maps it, the one mapping the checkout's
/// pages and the metrics use too; this middleware adds only what concerns the connection: a body that broke off or
/// stalled. It answers rather than rethrows, so an auto-generated HEAD endpoint still strips the body of an error
/// answer.
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
            response = HTTPProblem(answering: error, logger: context.logger, outage: outage).response
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
}

/// A ``GotchuAPI/Problem`` as Hummingbird answers it: its status, `application/problem+json`, `Retry-After` when its
/// kind says when to come back, and any headers of its own (`Allow`, a rate limit's `Retry-After`). ``GotchuAPI`` holds
/// the wire type and must not know Hummingbird, so the conformance is this wrapper's.
///
/// It is also how every error becomes an answer, once for every route group (``init(answering:logger:outage:)``):
/// the API sends it as problem+json, the checkout renders the same problem as its page
/// (``CheckoutProblemPage``), and the metrics count it under its status.
struct HTTPProblem: HTTPResponseError {
    var problem: Problem
    /// Headers beyond those of every problem; each replaces a header of the same name.
    var headers: HTTPFields

    init(_ problem: Problem, headers: HTTPFields = [:]) {
        self.problem = problem
        self.headers = headers
    }

    /// How the ledger answers `error`: the problem it is, with the headers that go with it (`Retry-After`, `Allow`).
    /// A refusal because the store is down or full is reported to `outage`; an error nobody expected is logged and
    /// answered with 500.
    init(answering error: any Error, logger: Logger, outage: StoreOutage? = nil) {
        switch error {
        case let answer as HTTPProblem:
            self = answer
        case let httpError as HTTPError:
            // Hummingbird's own, in its own format: the router's 404, a missing route parameter.
            switch httpError.status.code {
            case 404: self.init(Problem(.notFound, detail: "no such route"))
            case 405: self.init(Problem(.methodNotAllowed))
            case 413: self.init(Problem(.bodyTooLarge, detail: "request bodies are limited to 16 KiB"))
            case 400..<500: self.init(Problem(.badRequest, detail: httpError.body))
            default: self.init(Problem(.internalError))
            }
        case let problem as Problem:
            self.init(problem)
        case let refusal as LedgerError:
            if StoreOutage.isOutage(refusal) { outage?.failed(refusal, logger: logger) }
            self.init(Problem(refusal))
        case let invalid as InvalidField:
            self.init(Problem(invalid.isAmount ? .invalidAmount : .badRequest, detail: invalid.description))
        case let exceeded as RateLimiter.Exceeded:
            self.init(
                Problem(.rateLimited, detail: "too many requests; retry in \(exceeded.retryAfter) s"),
                headers: [.retryAfter: String(exceeded.retryAfter)]
            )
        case let notAllowed as MethodNotAllowed:
            self.init(
                Problem(.methodNotAllowed, detail: "this path serves \(notAllowed.allowHeader) only"),
                headers: [.allow: notAllowed.allowHeader]
            )
        case let refusal as CheckoutRefusal:
            self.init(
                Problem(
                    type: refusal.kind.typeURI,
                    title: refusal.title,
                    status: refusal.kind.status,
                    detail: refusal.message
                )
            )
        case let failure as OIDCSignInError:
            let kind: ProblemKind =
                switch failure.status.code {
                case 400: .badRequest
                case 403: .forbidden
                case 404: .notFound
                case 500...: .unavailable
                default: .unauthorized
                }
            self.init(
                Problem(
                    type: kind.typeURI,
                    title: "Not signed in",
                    status: failure.status.code,
                    detail: failure.message
                )
            )
        case let answer as any HTTPResponseError:
            // Another of Hummingbird's answers: its status, in our format.
            self.init(
                Problem(type: ProblemKind.badRequest.typeURI, title: "Refused", status: answer.status.code, detail: nil)
            )
        default:
            logger.error("unexpected error", metadata: ["error": "\(String(reflecting: error))"])
            self.init(Problem(.internalError, detail: "the server failed; the request may be retried"))
        }
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
        HTTPProblem(answering: self, logger: context.logger).response
    }
}

extension MethodNotAllowed: HTTPResponseError {
    var status: HTTPResponse.Status { .methodNotAllowed }

    /// `method-not-allowed`, with `Allow` naming what the path serves.
    func response(from request: Request, context: some RequestContext) -> Response {
        HTTPProblem(answering: self, logger: context.logger).response
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
