/// The API contract, served at `GET /openapi.yaml`. A test checks every route and status of the server against it.
enum OpenAPIDocument {
    static let yaml = #"""
        openapi: 3.1.0
        info:
          title: Gotchu ledger API
          version: 1.0.0
          description: |
            Payment sessions and a double-entry ledger for BLE proximity payments. A receiver creates a session and
            advertises its EID; a payer resolves the EID, locks the session and pays with an Idempotency-Key.
            Every error is an RFC 9457 problem (application/problem+json) whose `type` is `urn:gotchu:problem:<name>`;
            clients must tell problems apart by type, not by status (two kinds of 409 exist).
            Amounts are integer cents from 1 to the server's cap (default 100000000000).
            `/auth/dev-login` and `/dev/fund` exist only on a server started with --dev.
            `/sessions/resolve` (per client address), `/sessions/lock` (per client address and per user) and
            `/wallet/send` (per user) are rate limited: a refused request gets 429 with a Retry-After header in seconds. Each server process counts on its
            own, so behind a load balancer a client gets up to the limit once per replica.
        components:
          securitySchemes:
            bearer:
              type: http
              scheme: bearer
              bearerFormat: JWT
          schemas:
            Problem:
              type: object
              required: [type, title, status]
              properties:
                type:
                  type: string
                  enum: ["urn:gotchu:problem:bad-request", "urn:gotchu:problem:invalid-amount", "urn:gotchu:problem:unauthorized", "urn:gotchu:problem:forbidden", "urn:gotchu:problem:own-session", "urn:gotchu:problem:not-found", "urn:gotchu:problem:session-not-found", "urn:gotchu:problem:session-expired", "urn:gotchu:problem:session-cancelled", "urn:gotchu:problem:session-locked", "urn:gotchu:problem:lock-limit-reached", "urn:gotchu:problem:session-already-paid", "urn:gotchu:problem:lock-required", "urn:gotchu:problem:insufficient-funds", "urn:gotchu:problem:idempotency-key-missing", "urn:gotchu:problem:idempotency-key-reused", "urn:gotchu:problem:idempotency-in-flight", "urn:gotchu:problem:method-not-allowed", "urn:gotchu:problem:body-too-large", "urn:gotchu:problem:rate-limited", "urn:gotchu:problem:internal-error", "urn:gotchu:problem:unavailable"]
                title: { type: string }
                status: { type: integer }
                detail: { type: string }
            Cents:
              type: integer
              format: int64
              minimum: 1
              maximum: 100000000000
            SessionID:
              type: string
              format: uuid
              minLength: 36
              maxLength: 36
              pattern: "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
            EID:
              type: string
              minLength: 10
              maxLength: 10
              pattern: "^[0-9a-f]{10}$"
            DevLoginRequest:
              type: object
              required: [email]
              properties:
                email:
                  type: string
                  maxLength: 254
                  description: |
                    Trimmed, lowercased and normalised to NFC. The part before the @ (at most 64 characters) becomes
                    the display name payers see: it may not hold white space or control, format (Cf), bidi,
                    invisible or blank look-alike characters (such as U+202E, U+200B, U+2800). The domain is ASCII
                    letters, digits, hyphens and dots (an internationalised domain in its xn-- form). Other
                    addresses get 400 bad-request saying what is wrong.
                  pattern: "^[^@\\s\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890\\u0891\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb]{1,64}@[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63})+$"
            LoginResponse:
              type: object
              required: [token, user_id]
              properties:
                token: { type: string }
                user_id: { type: string }
            AmountRequest:
              type: object
              required: [amount_cents]
              properties:
                amount_cents: { $ref: "#/components/schemas/Cents" }
            ResolveRequest:
              type: object
              required: [eid]
              properties:
                eid: { $ref: "#/components/schemas/EID" }
            SessionRequest:
              type: object
              required: [sid]
              properties:
                sid: { $ref: "#/components/schemas/SessionID" }
            LedgerEntry:
              type: object
              required: [id, direction, amount_cents, type, ref_type, ref_id, created_at]
              properties:
                id: { type: string }
                direction: { type: string, enum: [DEBIT, CREDIT] }
                amount_cents: { type: integer, format: int64, minimum: 1 }
                type: { type: string }
                ref_type: { type: string }
                ref_id: { type: string }
                created_at: { type: string, format: date-time }
            WalletResponse:
              type: object
              required: [wallet_id, available_cents, recent]
              properties:
                wallet_id: { type: string }
                available_cents: { type: integer, format: int64, minimum: 0 }
                recent:
                  type: array
                  maxItems: 20
                  items: { $ref: "#/components/schemas/LedgerEntry" }
            CreateSessionResponse:
              type: object
              required: [sid, eid, exp_at]
              properties:
                sid: { type: string }
                eid: { $ref: "#/components/schemas/EID" }
                exp_at: { type: string, format: date-time }
            ResolveResponse:
              type: object
              required: [sid, amount_cents, payee_display]
              properties:
                sid: { type: string }
                amount_cents: { $ref: "#/components/schemas/Cents" }
                payee_display:
                  type: object
                  required: [name]
                  description: |
                    Who asks, for the payer's confirmation. Names are not unique and come from other users: show
                    them quoted, with control, format, bidi and invisible characters escaped, and the amount before
                    them.
                  properties:
                    name: { type: string, maxLength: 64, description: "The payee's display name." }
                    domain:
                      type: string
                      description: |
                        The domain of the payee's e-mail address, which tells apart payees of one name (bob of
                        example.com and bob of attacker.test). Optional: older servers do not send it.
            OKResponse:
              type: object
              required: [ok]
              properties:
                ok: { type: boolean, const: true }
            BalanceResponse:
              type: object
              required: [ok, new_balance_cents]
              properties:
                ok: { type: boolean, const: true }
                new_balance_cents: { type: integer, format: int64, minimum: 0 }
            SessionStatusResponse:
              type: object
              required: [sid, status, amount_cents, exp_at]
              properties:
                sid: { type: string }
                status: { type: string, enum: [CREATED, ADVERTISING, LOCKED, PAID, EXPIRED, CANCELLED] }
                amount_cents: { $ref: "#/components/schemas/Cents" }
                exp_at: { type: string, format: date-time }
                paid_at: { type: string, format: date-time }
            HealthResponse:
              type: object
              required: [status]
              properties:
                status: { type: string, const: ok }
        paths:
          /healthz:
            get:
              operationId: health
              summary: The server and its store answer.
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/HealthResponse" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /openapi.yaml:
            get:
              operationId: openapi
              summary: This document.
              responses:
                "200":
                  description: The OpenAPI document
                  content:
                    application/yaml:
                      schema: { type: string }
          /auth/dev-login:
            post:
              operationId: devLogin
              summary: Development login by e-mail, no password (only with --dev). Creates the user and wallet on first use.
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/DevLoginRequest" }
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/LoginResponse" }
                "400":
                  description: "Malformed JSON or a field of the wrong type (problem types: bad-request, invalid-amount)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /wallet/me:
            get:
              operationId: wallet
              summary: The caller's balance and its latest 20 ledger entries, newest first.
              security: [{ bearer: [] }]
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/WalletResponse" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /dev/fund:
            post:
              operationId: devFund
              summary: Credits the caller from the system funding account, through the ledger (only with --dev).
              security: [{ bearer: [] }]
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/AmountRequest" }
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/BalanceResponse" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "400":
                  description: "Malformed JSON or a field of the wrong type (problem types: bad-request, invalid-amount)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /sessions/create:
            post:
              operationId: createSession
              summary: Creates a payment session asking amount_cents of payers; returns its EID to advertise. With an
                Idempotency-Key (scoped to the caller, kept as long as the session) a retry with the same key and
                amount answers the first session again, whatever its status since, with the header Idempotent-Replayed
                true; concurrent creates with one key make one session.
              security: [{ bearer: [] }]
              parameters:
                - name: Idempotency-Key
                  in: header
                  required: false
                  schema: { type: string, minLength: 1, maxLength: 255, pattern: "^[!-~]+$" }
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/AmountRequest" }
              responses:
                "200":
                  description: OK
                  headers:
                    Idempotent-Replayed:
                      schema: { type: string, enum: ["true"] }
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/CreateSessionResponse" }
                  links:
                    ResolveIt:
                      operationId: resolveSession
                      requestBody: { eid: "$response.body#/eid" }
                    LockIt:
                      operationId: lockSession
                      requestBody: { sid: "$response.body#/sid" }
                    UnlockIt:
                      operationId: unlockSession
                      requestBody: { sid: "$response.body#/sid" }
                    PayIt:
                      operationId: send
                      requestBody: { sid: "$response.body#/sid" }
                    CancelIt:
                      operationId: cancelSession
                      requestBody: { sid: "$response.body#/sid" }
                    ItsStatus:
                      operationId: sessionStatus
                      parameters: { sid: "$response.body#/sid" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "400":
                  description: "Malformed JSON, a field of the wrong type, or a malformed Idempotency-Key (problem types: bad-request, invalid-amount)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "422":
                  description: "The key was first used with another amount (problem types: idempotency-key-reused)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /sessions/resolve:
            post:
              operationId: resolveSession
              summary: Looks a session up by the EID heard on the air (no authentication).
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/ResolveRequest" }
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/ResolveResponse" }
                "404":
                  description: "No session has this EID (problem types: session-not-found)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "409":
                  description: "Already paid (problem types: session-already-paid)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "410":
                  description: "Expired or cancelled (problem types: session-expired, session-cancelled)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "429":
                  description: "Too many requests from this client; retry after Retry-After seconds (problem types: rate-limited)"
                  headers:
                    Retry-After:
                      required: true
                      schema: { type: integer, minimum: 1 }
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "400":
                  description: "Malformed JSON or a field of the wrong type (problem types: bad-request, invalid-amount)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /sessions/lock:
            post:
              operationId: lockSession
              summary: Locks the session for the caller; the first lock wins and lapses after 30 s unless paid. A payer holds
                at most 3 live locks at once (the server's --max-locks-per-payer).
              security: [{ bearer: [] }]
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/SessionRequest" }
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/OKResponse" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "403":
                  description: "The payee cannot lock its own session (problem types: own-session)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "404":
                  description: "No such session (problem types: session-not-found)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "409":
                  description: "Locked by another payer, already paid, or the caller already holds as many locks as a payer may (problem types: session-locked, session-already-paid, lock-limit-reached)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "410":
                  description: "Expired or cancelled (problem types: session-expired, session-cancelled)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "422":
                  description: "The caller's balance does not cover the amount and the sessions it already holds locked (problem types: insufficient-funds)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "429":
                  description: "Too many requests from this client; retry after Retry-After seconds (problem types: rate-limited)"
                  headers:
                    Retry-After:
                      required: true
                      schema: { type: integer, minimum: 1 }
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "400":
                  description: "Malformed JSON, a field of the wrong type, or a sid that is not a session id (problem types: bad-request, invalid-amount)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /sessions/unlock:
            post:
              operationId: unlockSession
              summary: Releases the caller's lock on the session, so another payer may lock it at once. Idempotent; the
                session's last holder (or its payer) gets 200 when no lock is left to release.
              security: [{ bearer: [] }]
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/SessionRequest" }
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/OKResponse" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "403":
                  description: "The caller never locked this session (problem types: forbidden)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "404":
                  description: "No such session (problem types: session-not-found)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "409":
                  description: "Another payer holds the lock (problem types: session-locked)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "400":
                  description: "Malformed JSON, a field of the wrong type, or a sid that is not a session id (problem types: bad-request)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /sessions/cancel:
            post:
              operationId: cancelSession
              summary: Cancels a live session (payee only; cancelling twice is fine).
              security: [{ bearer: [] }]
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/SessionRequest" }
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/OKResponse" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "403":
                  description: "Only the payee can cancel (problem types: forbidden)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "404":
                  description: "No such session (problem types: session-not-found)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "409":
                  description: "Already paid (problem types: session-already-paid)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "410":
                  description: "Expired (problem types: session-expired)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "400":
                  description: "Malformed JSON, a field of the wrong type, or a sid that is not a session id (problem types: bad-request, invalid-amount)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /sessions/{sid}:
            get:
              operationId: sessionStatus
              summary: The session's status, for its payee, its current lock holder or its payer only.
              security: [{ bearer: [] }]
              parameters:
                - name: sid
                  in: path
                  required: true
                  schema: { $ref: "#/components/schemas/SessionID" }
              responses:
                "200":
                  description: OK
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/SessionStatusResponse" }
                "400":
                  description: "The sid is not a session id (problem types: bad-request)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "404":
                  description: "No such session visible to the caller (problem types: session-not-found)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /sessions/{sid}/events:
            get:
              operationId: sessionEvents
              summary: The session's changes as server-sent events, for its payee only.
              description: |
                A text/event-stream (WHATWG server-sent events). Each event's `event` field names what happened
                (advertising, locked, unlocked, paid, expired, cancelled, eid-rotated), its `data` is one line of
                JSON, the session's SessionStatusResponse after the change, and its `id` names that state. The stream
                carries states, not a log: the first event is the current state, unless the request's Last-Event-ID
                names it (then nothing is sent until the state moves on), and changes nobody was listening for arrive
                as the state they led to. The stream ends after paid, expired or cancelled. An idle stream sends a
                comment line (`: keep-alive`) at least every 15 s by default, and starts with `retry: 2000`. A change
                committed through any server on the same database is delivered (PostgreSQL LISTEN/NOTIFY); a stream
                also re-reads its session every 30 s by default, so a lost notification only delays an event. Each
                user may hold a few streams open at once per server (4 by default); past that the request is refused
                429 rate-limited.
              security: [{ bearer: [] }]
              parameters:
                - name: sid
                  in: path
                  required: true
                  schema: { $ref: "#/components/schemas/SessionID" }
                - name: Last-Event-ID
                  in: header
                  required: false
                  description: The id of the last event received; ids the server did not make are ignored.
                  schema: { type: string, maxLength: 64 }
              responses:
                "200":
                  description: OK
                  content:
                    text/event-stream:
                      schema: { type: string }
                "400":
                  description: "The sid is not a session id (problem types: bad-request)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "404":
                  description: "No such session of the caller's (problem types: session-not-found)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "429":
                  description: "The user holds the most event streams allowed at once on this server; close one, retry after Retry-After seconds (problem types: rate-limited)"
                  headers:
                    Retry-After:
                      required: true
                      schema: { type: integer, minimum: 1 }
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
          /wallet/send:
            post:
              operationId: send
              summary: Pays a session the caller has locked. The outcome is stored under the Idempotency-Key (scoped to the
                caller, kept at least 24 h) in the same transaction as the ledger entries; a retry with the same key and
                session replays it with the header Idempotent-Replayed true. Refusals that the payer can remedy and retry
                (lock-required, session-locked) and unknown sessions are not stored, so the same key can pay after a
                fresh lock.
              security: [{ bearer: [] }]
              parameters:
                - name: Idempotency-Key
                  in: header
                  required: true
                  schema: { type: string, minLength: 1, maxLength: 255, pattern: "^[!-~]+$" }
              requestBody:
                required: true
                content:
                  application/json:
                    schema: { $ref: "#/components/schemas/SessionRequest" }
              responses:
                "200":
                  description: Paid; the caller's new balance
                  headers:
                    Idempotent-Replayed:
                      schema: { type: string, enum: ["true"] }
                  content:
                    application/json:
                      schema: { $ref: "#/components/schemas/BalanceResponse" }
                "401":
                  description: "Missing, malformed, forged or expired token (problem types: unauthorized)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "403":
                  description: "The payee cannot pay its own session (problem types: own-session)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "404":
                  description: "No such session (problem types: session-not-found)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "409":
                  description: "Locked by another payer, not locked by the caller, already paid, or the same key still in flight (problem types: session-locked, lock-required, session-already-paid, idempotency-in-flight)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "410":
                  description: "Expired or cancelled (problem types: session-expired, session-cancelled)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "422":
                  description: "Insufficient funds, or the key was used for another session (problem types: insufficient-funds, idempotency-key-reused)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "429":
                  description: "Too many payments from this user; retry after Retry-After seconds (problem types: rate-limited)"
                  headers:
                    Retry-After:
                      required: true
                      schema: { type: integer, minimum: 1 }
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "400":
                  description: "Malformed JSON, a field of the wrong type, a sid that is not a session id, or a missing or malformed Idempotency-Key (problem types: bad-request, idempotency-key-missing)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "413":
                  description: "Body over 16 KiB (problem types: body-too-large)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "500":
                  description: "Server failure (problem types: internal-error)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
                "503":
                  description: "Store unavailable (problem types: unavailable)"
                  content:
                    application/problem+json:
                      schema: { $ref: "#/components/schemas/Problem" }
        """#
}
