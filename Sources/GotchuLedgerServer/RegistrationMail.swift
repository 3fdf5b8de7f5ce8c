public import Foundation
import GotchuAPI
import GotchuLedger
import HTTPTypes
import Hummingbird
public import Logging
import NIOCore

/// Sends the mails of open registration: the code that confirms an address, or word to an address's owner that
/// someone tried to register it. The server sends one mail per registration whatever the address turned out to be,
/// before it answers.
public protocol RegistrationMailer: Sendable {
    /// Hands `mail` over for delivery; throws if it could not be.
    func send(_ mail: RegistrationMail) async throws
}

/// One mail to one address: plain text, UTF-8.
public struct RegistrationMail: Sendable, Hashable {
    /// The address it goes to, as stored (normalized).
    public var recipient: String
    /// The subject line (one line, no line breaks).
    public var subject: String
    /// The text, lines separated by `\n`.
    public var body: String

    /// A mail.
    public init(recipient: String, subject: String, body: String) {
        self.recipient = recipient
        self.subject = subject
        self.body = body
    }

    /// The recipient as one RFC 5322 address: the part before the last `@` as it is where it is a dot-atom, else as
    /// a quoted string, so that an address such as `a,b@example.com` stays one address (`"a,b"@example.com`) in the
    /// `To:` header and on `sendmail`'s command line instead of becoming two.
    public var addressSpec: String {
        guard let at = recipient.lastIndex(of: "@") else { return recipient }
        let local = recipient[..<at]
        let domain = recipient[recipient.index(after: at)...]
        let atext = Set("!#$%&'*+-/=?^_`{|}~".unicodeScalars)
        let isAtom = { (atom: Substring) in
            !atom.isEmpty
                && atom.unicodeScalars.allSatisfy {
                    ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || atext.contains($0)
                        || !$0.isASCII
                }
        }
        if local.split(separator: ".", omittingEmptySubsequences: false).allSatisfy(isAtom) {
            return recipient
        }
        let quoted = local.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "\"" + quoted + "\"@" + domain
    }

    /// The mail as an RFC 5322 message (RFC 6532 where the address is not ASCII), with `\n` line ends as a local
    /// `sendmail` reads them. Nothing a registrant typed reaches a header but the recipient, which the address checks
    /// keep free of line breaks and white space, and which is written as one address (``addressSpec``).
    public func message(from sender: String, date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        return [
            "From: \(sender)",
            "To: \(addressSpec)",
            "Subject: \(subject)",
            "Date: \(formatter.string(from: date))",
            "Auto-Submitted: auto-generated",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: 8bit",
            "",
            body,
        ].joined(separator: "\n") + "\n"
    }

    /// The mail for what a registration of `recipient` came to; `serverName` (`Gotchu ledger`, written after "the" or
    /// "Your") tells the reader which ledger wrote,
    /// `codeLifetime` how long a code lasts.
    static func registration(
        _ outcome: RegistrationOutcome,
        recipient: String,
        serverName: String,
        codeLifetime: Duration
    ) -> RegistrationMail {
        switch outcome {
        case .confirmationNeeded(let code, _):
            let minutes = max(1, Int((Double(codeLifetime.components.seconds) / 60).rounded(.up)))
            return RegistrationMail(
                recipient: recipient,
                subject: "Your \(serverName) confirmation code: \(code)",
                body: """
                    Someone, hopefully you, registered this address with the \(serverName).

                    Confirmation code: \(code)

                    Send it with the address and the password you chose to POST /auth/register/confirm. The code is \
                    valid for the next \(Self.minutes(minutes)), and the account can neither log in nor be paid \
                    until it is confirmed.

                    If you did not register, ignore this mail: without the code nothing happens.
                    """
            )
        case .alreadyRegistered:
            return RegistrationMail(
                recipient: recipient,
                subject: "Someone tried to register your address with the \(serverName)",
                body: """
                    Someone tried to register a new account with this address at the \(serverName), which already has \
                    your account. Nothing was changed, and no account was created.

                    If this was you, log in with your password instead; if you forgot it, ask the ledger's operator \
                    to reset it. If it was not you, you need do nothing.
                    """
            )
        case .lookAlike:
            return RegistrationMail(
                recipient: recipient,
                subject: "Your address cannot be registered with the \(serverName)",
                body: """
                    Someone, hopefully you, tried to register this address with the \(serverName). It looks too much \
                    like the address of an existing account (payers could not tell the two apart), so no account \
                    was created. Please register with another address.
                    """
            )
        }
    }

    private static func minutes(_ count: Int) -> String { count == 1 ? "minute" : "\(count) minutes" }
}

/// Mails through a `sendmail`-compatible program (sendmail, msmtp, ssmtp, Postfix's or Exim's `sendmail`): it is run
/// as `PATH -i -- RECIPIENT` with the message on its standard input, and must exit 0 once it has taken the mail.
/// `--` keeps an address that starts with `-` from being read as an option.
public struct SendmailCommand: RegistrationMailer {
    /// The program.
    public var path: String
    /// The `From:` of every mail, such as `Gotchu <noreply@example.com>`.
    public var sender: String
    /// How long the program may take before it is killed and the mail counts as not sent.
    public var timeout: Duration

    /// A mailer that runs `path`.
    public init(path: String, sender: String, timeout: Duration = .seconds(30)) {
        self.path = path
        self.sender = sender
        self.timeout = timeout
    }

    /// Why a mail could not be handed over.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public func send(_ mail: RegistrationMail) async throws {
        let box = ProcessBox()
        let process = box.process
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["-i", "--", mail.addressSpec]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        let timeout = self.timeout
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            if box.process.isRunning { box.process.terminate() }
        }
        defer { watchdog.cancel() }
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: Failure(description: "cannot run the mail command \(path): \(error)"))
                return
            }
            // The message is small (a pipe holds it); a program that exits without reading it gets EPIPE, which
            // Foundation reports as an error here rather than a signal.
            try? input.fileHandleForWriting.write(contentsOf: Data(mail.message(from: sender, date: Date()).utf8))
            try? input.fileHandleForWriting.close()
        }
        guard status == 0 else {
            let said = String(decoding: errors.fileHandleForReading.availableData.prefix(500), as: UTF8.self)
            throw Failure(description: "the mail command \(path) exited with status \(status): \(said)")
        }
    }
}

/// A child process the timeout may end from another task; `Process` is safe to ask and terminate from any thread.
private final class ProcessBox: @unchecked Sendable {
    let process = Process()
}

/// Writes each mail to the log instead of sending it: the codes of a development server (`--dev` without
/// `--mail-command`), where the person registering reads the server's output.
public struct LoggedRegistrationMailer: RegistrationMailer {
    /// Where the mails go.
    public var logger: Logger

    /// A mailer that logs at notice level.
    public init(logger: Logger) { self.logger = logger }

    public func send(_ mail: RegistrationMail) async throws {
        logger.notice(
            "registration mail (not sent: development mode without --mail-command)",
            metadata: ["to": "\(mail.recipient)", "subject": "\(mail.subject)"]
        )
    }
}

// The register route's mail and answer.
extension LedgerRoutes {
    /// Mails `email` what its registration came to. A mail that could not be handed over is a 503 whatever the
    /// outcome, so the answer still tells nothing of the address.
    func sendRegistrationMail(
        _ outcome: RegistrationOutcome,
        to email: String,
        _ context: LedgerRequestContext
    ) async throws {
        guard let mailer else { throw Problem(.unavailable, detail: "this server cannot send mail") }
        let mail = RegistrationMail.registration(
            outcome,
            recipient: email,
            serverName: "Gotchu ledger",
            codeLifetime: store.policy.confirmationCodeLifetime
        )
        do {
            try await mailer.send(mail)
        } catch {
            context.logger.error("registration mail not sent", metadata: ["error": "\(error)"])
            throw Problem(.unavailable, detail: "the mail to this address could not be sent; try again later")
        }
    }

    /// The one answer of `POST /auth/register`.
    func registrationAccepted() throws -> Response {
        let minutes = store.policy.confirmationCodeLifetime.components.seconds / 60
        let body = RegistrationResponse(
            detail: "A mail is on its way to this address. If it holds a confirmation code, send the code with the "
                + "address and the password to POST /auth/register/confirm within \(minutes) minutes.",
            codeExpiresIn: Int(store.policy.confirmationCodeLifetime.components.seconds)
        )
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(
            status: .accepted,
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: try APIJSON.encoder().encode(body)))
        )
    }
}
