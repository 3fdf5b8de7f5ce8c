import GotchuAPI

/// Session ids (and the ids of split payments) as the stores make them: lowercase UUIDs (36 characters).
enum SessionID {
    /// Checks a session id from a request before anything looks it up or stores it: a made-up id of another shape
    /// can name no session, so it is refused at the edge (400) rather than answered 404 after a store lookup. A
    /// UUID in capitals names the same session, so it is lowercased.
    /// `described` says what the id should be, for the problem's detail.
    static func validate(
        _ sid: String,
        described: String = "sid must be a session id as create or resolve returned it"
    ) throws(Problem) -> String {
        let bytes = Array(sid.utf8)
        let hyphens: Set<Int> = [8, 13, 18, 23]
        guard bytes.count == 36,
            bytes.indices.allSatisfy({ index in
                let byte = bytes[index]
                if hyphens.contains(index) { return byte == UInt8(ascii: "-") }
                return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
            })
        else {
            throw Problem(.badRequest, detail: described + " (a UUID)")
        }
        return sid.lowercased()
    }
}
