import Foundation
public import GotchuAPI
import Hummingbird
import Logging
import NIOHTTP1

/// Turns every error into an RFC 9457 `application/problem+json` response, and writes one log line per request:
/// method, route, status and latency. Bodies, headers and tokens are never logged. A request whose client hung up or
/// stalled before its body arrived is logged as abandoned, with the reason, at info level: that is the client's doing,
/// not a server failure.
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
        } catch let exceeded as RateLimiter.Exceeded {
            response = Self.problemResponse(
                for: Problem(.rateLimited, detail: "too many requests; retry in \(exceeded.retryAfter) s")
            )
            response.headers[.retryAfter] = String(exceeded.retryAfter)
        } catch let refused as MethodNotAllowed {
            response = Self.problemResponse(
                for: Problem(.methodNotAllowed, detail: "this path serves \(refused.allowHeader) only")
            )
            response.headers[.allow] = refused.allowHeader
        } catch is RequestReadTimeout {
            // The connection is already closing; the answer is for a client that only half-closed.
            abandoned = "read timeout"
            response = Self.problemResponse(for: Problem(.badRequest, detail: "the request did not arrive in time"))
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
            response = Self.problemResponse(for: Problem(.badRequest, detail: detail))
            response.headers[.connection] = "close"
        } catch {
            if let refusal = error as? LedgerError, StoreOutage.isOutage(refusal) {
                outage.failed(refusal, logger: context.logger)
            }
            response = Self.problemResponse(for: Self.problem(for: error, logger: context.logger))
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

    static func problem(for error: any Error, logger: Logger) -> Problem {
        switch error {
        case let problem as Problem:
            return problem
        case let refusal as LedgerError:
            return Problem(refusal)
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
        if let seconds = ProblemKind(typeURI: problem.type)?.retryAfterSeconds {
            headers[.retryAfter] = String(seconds)
        }
        let body = (try? APIJSON.encoder().encode(problem)) ?? Data()
        return Response(
            status: HTTPResponse.Status(code: problem.status),
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}

extension Problem {
    /// The problem a ledger refusal is answered with: its kind picks the type (and so the status), its detail is
    /// passed on.
    public init(_ refusal: LedgerError) {
        let kind: ProblemKind =
            switch refusal.kind {
            case .invalidInput: .badRequest
            case .invalidAmount: .invalidAmount
            case .unknownUser: .unauthorized
            case .forbidden: .forbidden
            case .accountExists: .accountExists
            case .ownSession: .ownSession
            case .emailUnconfirmed: .emailUnconfirmed
            case .sessionNotFound: .sessionNotFound
            case .sessionExpired: .sessionExpired
            case .sessionCancelled: .sessionCancelled
            case .eidRetired: .eidRetired
            case .eidLimitReached: .eidLimitReached
            case .sessionLocked: .sessionLocked
            case .lockLimitReached: .lockLimitReached
            case .sessionAlreadyPaid: .sessionAlreadyPaid
            case .lockRequired: .lockRequired
            case .insufficientFunds: .insufficientFunds
            case .idempotencyKeyReused: .idempotencyKeyReused
            case .idempotencyInFlight: .idempotencyInFlight
            case .notFound: .notFound
            case .payoutNotPending: .payoutNotPending
            case .sessionNotPaid: .sessionNotPaid
            case .refundExceedsPayment: .refundExceedsPayment
            case .unavailable: .unavailable
            case .databaseUnavailable: .databaseUnavailable
            case .storageFull: .storageFull
            case .inconsistent: .internalError
            }
        self.init(kind, detail: refusal.detail)
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
