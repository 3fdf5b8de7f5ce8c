import GotchuAPI
import GotchuCheckout
import GotchuCore
import HTTPTypes
import Hummingbird

/// The checkout's rendering of an answer: the page that says in a payer's words what happened and what to do next,
/// with the answer's status and headers. The answer is the same ``HTTPProblem`` the API would send as problem+json
/// (``HTTPProblem/init(answering:logger:outage:)``); only its rendering is the checkout's.
struct CheckoutProblemPage {
    let answer: HTTPProblem
    /// How long a payer's hold on a session lasts, which the pages of a held session name.
    let lockLifetime: Duration

    /// The page for a checkout address: `root` leads from it back to `/p/`; with `eid` (the path's checkout link or
    /// EID) a link back to the payment where going back helps; with `account`, the header's sign-out form.
    func response(root: String, eid: String?, account: CheckoutPages.Account? = nil) -> Response {
        let words = self.words
        let page = CheckoutPages.outcome(
            words.title,
            words.message,
            root: root,
            eid: words.link == nil ? nil : eid,
            link: words.link ?? "",
            account: account
        )
        var headers = HTTPFields()
        if let seconds = answer.problem.kind?.retryAfterSeconds { headers[.retryAfter] = String(seconds) }
        for field in answer.headers { headers[field.name] = field.value }
        return CheckoutHTML.response(page, status: answer.status, headers: headers)
    }

    /// The page's heading and message, and the text of its link back to the payment (`nil`: no link, going back
    /// cannot help).
    private var words: (title: String, message: String, link: String?) {
        let problem = answer.problem
        let back = "Back to the payment"
        let seconds = lockLifetime.components.seconds
        // A problem with words of its own (a refusal of the checkout's, a failed sign-in) says them.
        guard let kind = problem.kind, problem.title == kind.title else {
            return (problem.title, problem.detail ?? "", back)
        }
        switch kind {
        case .notFound: return ("Not found", "There is nothing here.", nil)
        case .methodNotAllowed: return ("Not here", "This address does not take that kind of request.", nil)
        case .sessionNotFound:
            return (
                "Unknown QR code",
                "No charge has this code. Check the address, or ask the terminal for its code again.",
                nil
            )
        case .eidRetired:
            return (
                "This QR code was replaced",
                "The terminal shows a new QR code now. Scan the terminal's new QR code and pay there.", nil
            )
        case .sessionExpired: return ("Expired", "This charge has expired; nothing was paid. Ask for a new one.", nil)
        case .sessionCancelled: return ("Cancelled", "The merchant cancelled this charge. Nothing was paid.", nil)
        case .sessionAlreadyPaid:
            return ("Already paid", "Someone has already paid this charge. Nothing was taken from your wallet.", nil)
        case .ownSession: return ("This is your own charge", "You cannot pay a charge you asked for.", nil)
        case .noFreeShare:
            return (
                "Every share is taken",
                "Every share of this charge is paid, or being paid by someone else right now. Nothing was taken "
                    + "from your wallet.", back
            )
        case .sessionLocked:
            return (
                "Someone else is paying",
                "Another payer is paying this charge right now. If they do not finish, it is free again within "
                    + "\(seconds) seconds: try again then.", back
            )
        case .lockLimitReached:
            return (
                "Too many payments open",
                "You are in the middle of too many payments at once. Finish one, or wait \(seconds) seconds, then "
                    + "try again.", back
            )
        case .insufficientFunds:
            return ("Not enough funds", "Your wallet does not hold enough for this payment. Nothing was paid.", back)
        case .idempotencyInFlight:
            return (
                "Payment under way",
                "This payment is still being processed. Open the payment again in a moment to see how it ended.", back
            )
        case .lockRequired:
            return ("Try again", "Your hold on this charge lapsed before the payment; nothing was paid.", back)
        case .databaseUnavailable, .unavailable, .storageFull:
            return ("The ledger is unavailable", "Nothing was paid. Try again in a few seconds.", back)
        case .rateLimited:
            let wait = answer.headers[.retryAfter] ?? "a few"
            return (
                "Too many requests",
                "Too many requests came from your address. Wait \(wait) seconds, then try again.", "Try again"
            )
        case .internalError:
            return (
                "Something went wrong", "The ledger failed to answer. Nothing was paid; try again in a moment.",
                "Try again"
            )
        default:
            return (problem.title, DisplayText.escaped(problem.detail ?? ""), back)
        }
    }
}
