import Foundation
import GotchuAPI
import GotchuTesting
import Testing

extension Fuzzing {
    /// The ledger API's JSON decoders: whatever arrives is a value or a clean error the server and client handle, and
    /// amounts are only ever what the text says.
    @Suite("Fuzzing: API request and response decoders", .timeLimit(.minutes(10)))
    struct APIFuzzTests {
        static let requestKeys = ["amount_cents", "eid", "sid", "email"]
        static let responseKeys = [
            "token", "user_id", "wallet_id", "available_cents", "recent", "id", "direction", "amount_cents", "type",
            "ref_type", "ref_id", "created_at", "sid", "eid", "exp_at", "payee_display", "name", "ok",
            "new_balance_cents",
            "status", "paid_at", "domain",
        ]

        /// Decodes `data` as `T`, recording an issue for any error other than the ones callers handle.
        @discardableResult
        static func decode<T: Decodable>(
            _ type: T.Type,
            _ data: [UInt8],
            allowInvalidField: Bool,
            _ input: FuzzInput
        ) -> Result<T, any Error>? {
            do {
                return .success(try APIJSON.decoder().decode(T.self, from: Data(data)))
            } catch let error as InvalidField {
                #expect(allowInvalidField, "\(T.self) threw \(error) \(input.replay)")
                return .failure(error)
            } catch let error as DecodingError {
                return .failure(error)
            } catch {
                Issue.record("\(T.self) threw \(Swift.type(of: error)): \(error) \(input.replay)")
                return nil
            }
        }

        @Test("request bodies decode to a value, an InvalidField or a DecodingError")
        func requests() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(5)) { input in
                let data = JSONFuzzing.body(&input, keys: Self.requestKeys, valid: FuzzSeeds.requestBodies)
                Self.decode(DevLoginRequest.self, data, allowInvalidField: true, input)
                Self.decode(AmountRequest.self, data, allowInvalidField: true, input)
                Self.decode(ResolveRequest.self, data, allowInvalidField: true, input)
                Self.decode(SessionRequest.self, data, allowInvalidField: true, input)
            }
            #expect(report.iterations > 0)
        }

        @Test("response bodies decode to a value or a DecodingError")
        func responses() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(5)) { input in
                let data = JSONFuzzing.body(&input, keys: Self.responseKeys, valid: FuzzSeeds.responseBodies)
                Self.decode(LoginResponse.self, data, allowInvalidField: false, input)
                Self.decode(WalletResponse.self, data, allowInvalidField: false, input)
                Self.decode(CreateSessionResponse.self, data, allowInvalidField: false, input)
                Self.decode(ResolveResponse.self, data, allowInvalidField: false, input)
                Self.decode(OKResponse.self, data, allowInvalidField: false, input)
                Self.decode(BalanceResponse.self, data, allowInvalidField: false, input)
                Self.decode(SessionStatusResponse.self, data, allowInvalidField: false, input)
                Self.decode(HealthResponse.self, data, allowInvalidField: false, input)
                Self.decode(Problem.self, data, allowInvalidField: false, input)
            }
            #expect(report.iterations > 0)
        }

        /// An amount literal: a JSON number, a string, or another JSON type.
        static func amountLiteral(_ input: inout FuzzInput) -> String {
            switch input.int(in: 0...4) {
            case 0: return String(input.boundaryInteger(Int64.self))
            case 1: return input.pick(JSONFuzzing.numbers)
            case 2: return "\"" + input.pick(JSONFuzzing.numbers) + "\""
            case 3: return String(repeating: input.pick(["1", "9"]), count: input.int(in: 18...21))
            default: return JSONFuzzing.value(&input, depth: 1)
            }
        }

        @Test(
            "strict cents: exactly the whole number written; strings, fractions, overflow, rounding and other types refused"
        )
        func strictCents() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(4)) { input in
                let literal = Self.amountLiteral(&input)
                let body = #"{"amount_cents":"# + literal + "}"
                let result = Self.decode(AmountRequest.self, Array(body.utf8), allowInvalidField: true, input)
                let isIntegerLiteral = literal.wholeMatch(of: /-?(0|[1-9][0-9]*)/) != nil
                switch result {
                case .success(let request):
                    // JSON does not tell 100 from 1e2 or 100.0 apart; what matters is that the value is exactly the
                    // whole number written, never a rounding of it.
                    let exact = Decimal(string: literal, locale: Locale(identifier: "en_US_POSIX"))
                    #expect(
                        !literal.hasPrefix("\"") && exact == Decimal(request.amountCents),
                        "accepted \(literal) as \(request.amountCents) \(input.replay)"
                    )
                case .failure(let error as InvalidField):
                    #expect(error.isAmount && error.field == "amount_cents", "\(input.replay)")
                    if isIntegerLiteral {
                        #expect(Int64(literal) == nil, "refused the integer \(literal) \(input.replay)")
                    }
                case .failure(let error):
                    Issue.record("\(literal) threw \(error) instead of InvalidField \(input.replay)")
                case nil:
                    break
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("lenient cents: an integer or a string of digits, exactly; nothing else")
        func lenientCents() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(4)) { input in
                let literal = Self.amountLiteral(&input)
                let body = #"{"sid":"s","amount_cents":"# + literal + #","payee_display":{"name":"n"}}"#
                let result = Self.decode(ResolveResponse.self, Array(body.utf8), allowInvalidField: false, input)
                guard case .success(let response) = result else { return }
                let unquoted =
                    literal.hasPrefix("\"") && literal.hasSuffix("\"") ? String(literal.dropFirst().dropLast()) : nil
                if let unquoted {
                    #expect(Int64(unquoted) == response.amountCents, "\(literal) \(input.replay)")
                } else {
                    let exact = Decimal(string: literal, locale: Locale(identifier: "en_US_POSIX"))
                    #expect(
                        exact == Decimal(response.amountCents),
                        "\(literal) as \(response.amountCents) \(input.replay)"
                    )
                }
            }
            #expect(report.iterations > 0)
        }

        @Test("strict strings: the JSON string sent, or an InvalidField naming the field")
        func strictStrings() {
            let report = Fuzz.run(iterations: 20_000, budget: .seconds(4)) { input in
                let literal = input.oneIn(2) ? JSONFuzzing.stringLiteral(&input) : JSONFuzzing.value(&input, depth: 1)
                let body = #"{"eid":"# + literal + "}"
                let expected = try? JSONDecoder().decode([String].self, from: Data(("[" + literal + "]").utf8)).first
                let result = Self.decode(ResolveRequest.self, Array(body.utf8), allowInvalidField: true, input)
                switch result {
                case .success(let request): #expect(request.eid == expected, "\(literal) \(input.replay)")
                case .failure(let error as InvalidField):
                    #expect(expected == nil && error.field == "eid", "\(literal) \(input.replay)")
                case .failure:
                    // Only a literal that is not JSON at all may fail the whole document.
                    #expect(expected == nil, "\(literal) \(input.replay)")
                case nil: break
                }
            }
            #expect(report.iterations > 0)
        }
    }
}
