import Testing

/// Every fuzz suite, nested here so that their cases run one at a time. A fuzz case keeps a cooperative thread busy
/// for its whole budget without suspending; two at once would take both threads of a 2-core machine from the ledger
/// servers and clients that other tests run in this process, and those would time out.
@Suite(.serialized, .timeLimit(.minutes(10)))
enum Fuzzing {}
