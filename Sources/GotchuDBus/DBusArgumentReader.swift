#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Walks a message body in place, one value at a time, straight from its wire format: values are read only when
/// asked for and only as the type they are, so a wrong type on the wire shows as a type code the caller did not
/// expect.
///
/// The reader never trusts the bytes: every length and offset is checked against its container, and a value that
/// does not fit ends the walk (``typeCode`` becomes 0) instead of being read. Strings are not checked as UTF-8 here:
/// they are compared byte for byte, and text is decoded with repair.
///
/// Readers and the strings and bytes they give are plain values that point into the message: like the view they
/// come from, they are valid only during the handler call. Nothing on this path is generic, so no type metadata is
/// looked up at run time for a signal.
package struct DBusArgumentReader {
    /// The message body. Alignment is reckoned from its start, which D-Bus places on an 8-byte boundary.
    let body: UnsafeRawBufferPointer
    let bigEndian: Bool
    /// The types walked: a run of complete types, or in an array its one element type, repeated.
    let types: UnsafeBufferPointer<UInt8>
    /// Whether this reader walks an array's elements (``types`` repeated until ``limit``).
    let repeats: Bool
    /// Where the current value's type starts in ``types`` (always 0 in an array).
    var typeIndex: Int
    /// Where the current value starts in ``body``, before its alignment padding.
    var offset: Int
    /// The end of the enclosing container in ``body``.
    let limit: Int
    /// How many containers enclose this reader.
    let depth: Int

    /// Containers nest at most this deep (D-Bus allows 32 arrays and 32 structures, variants within that).
    static let maximumDepth = 64

    /// A reader of `body`'s values, typed by `signature`.
    package init(body: UnsafeRawBufferPointer, bigEndian: Bool, signature: UnsafeBufferPointer<UInt8>) {
        self.init(
            body: body,
            bigEndian: bigEndian,
            types: signature,
            repeats: false,
            offset: 0,
            limit: body.count,
            depth: 0
        )
    }

    init(
        body: UnsafeRawBufferPointer,
        bigEndian: Bool,
        types: UnsafeBufferPointer<UInt8>,
        repeats: Bool,
        offset: Int,
        limit: Int,
        depth: Int
    ) {
        self.body = body
        self.bigEndian = bigEndian
        self.types = types
        self.repeats = repeats
        self.typeIndex = 0
        self.offset = offset
        self.limit = min(limit, body.count)
        self.depth = depth
    }

    // MARK: Where the walk is

    /// The type code of the current value (`s`, `n`, `a`, `v`, `e` for a dictionary entry, `r` for a structure…),
    /// or 0 at the end.
    package var typeCode: UInt8 {
        guard let code = currentCode else { return 0 }
        return Self.publicCode(code)
    }

    /// For an array: the type code of its elements (`e` for a dictionary's entries).
    package var elementTypeCode: UInt8 {
        guard currentCode == UInt8(ascii: "a"), typeIndex + 1 < types.count else { return 0 }
        return Self.publicCode(types[typeIndex + 1])
    }

    /// The complete signature of the current value, such as `a{sv}` (copied; for diagnostics and rare checks).
    package var signatureText: String {
        guard currentCode != nil, let end = Self.typeEnd(types, typeIndex, depth: depth) else { return "" }
        return String(decoding: UnsafeBufferPointer(rebasing: types[typeIndex..<end]), as: UTF8.self)
    }

    /// Moves to the next value; `false` at the end.
    @discardableResult
    package mutating func next() -> Bool {
        guard currentCode != nil else { return false }
        guard let end = Self.valueEnd(types, typeIndex, at: offset, in: body, limit: limit, bigEndian, depth: depth)
        else {
            stop()
            return false
        }
        offset = end.offset
        if !repeats { typeIndex = end.typeIndex }
        return currentCode != nil
    }

    // MARK: Reading the current value

    /// Whether the current value is a string (or object path) equal to `expected`, compared in place.
    package func isString(_ expected: StaticString) -> Bool {
        guard let text = stringBytes else { return false }
        return DBusString.equal(text, expected)
    }

    /// Whether the current value is a string (or object path) equal to `expected`, compared in place.
    package func isString(_ expected: String) -> Bool {
        guard let text = stringBytes else { return false }
        return DBusString.equal(text, expected)
    }

    /// The current string, object path or signature (copied), or `nil` for another type.
    package var string: String? {
        stringBytes.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The current string, object path or signature in place, without its terminating NUL.
    var stringBytes: UnsafeBufferPointer<UInt8>? {
        guard let code = currentCode,
            code == UInt8(ascii: "s") || code == UInt8(ascii: "o") || code == UInt8(ascii: "g"),
            let text = Self.textRange(code, at: offset, in: body, limit: limit, bigEndian)
        else { return nil }
        return Self.buffer(body, text)
    }

    /// The current value if it is an `n`.
    package var int16: Int16? {
        guard currentCode == UInt8(ascii: "n") else { return nil }
        let start = Self.align(offset, 2)
        guard start + 2 <= limit else { return nil }
        let raw = body.loadUnaligned(fromByteOffset: start, as: UInt16.self)
        return Int16(bitPattern: bigEndian ? UInt16(bigEndian: raw) : UInt16(littleEndian: raw))
    }

    /// For an `ay`: its bytes, in place; `nil` for another type.
    package var bytes: UnsafeBufferPointer<UInt8>? {
        guard elementTypeCode == UInt8(ascii: "y"), let contents = arrayContents else { return nil }
        return Self.buffer(body, contents)
    }

    /// A reader inside the current container (array, dictionary entry, variant or structure); `nil` when the current
    /// value is not a container or does not fit in its own.
    package var contents: DBusArgumentReader? {
        guard let code = currentCode, depth < Self.maximumDepth else { return nil }
        switch code {
        case UInt8(ascii: "a"):
            guard let contents = arrayContents,
                let elementEnd = Self.typeEnd(types, typeIndex + 1, depth: depth + 1)
            else { return nil }
            return DBusArgumentReader(
                body: body,
                bigEndian: bigEndian,
                types: UnsafeBufferPointer(rebasing: types[(typeIndex + 1)..<elementEnd]),
                repeats: true,
                offset: contents.lowerBound,
                limit: contents.upperBound,
                depth: depth + 1
            )
        case UInt8(ascii: "("), UInt8(ascii: "{"):
            guard let end = Self.typeEnd(types, typeIndex, depth: depth) else { return nil }
            return DBusArgumentReader(
                body: body,
                bigEndian: bigEndian,
                types: UnsafeBufferPointer(rebasing: types[(typeIndex + 1)..<(end - 1)]),
                repeats: false,
                offset: Self.align(offset, 8),
                limit: limit,
                depth: depth + 1
            )
        case UInt8(ascii: "v"):
            guard let signature = Self.textRange(UInt8(ascii: "g"), at: offset, in: body, limit: limit, bigEndian)
            else { return nil }
            return DBusArgumentReader(
                body: body,
                bigEndian: bigEndian,
                types: Self.buffer(body, signature),
                repeats: false,
                offset: signature.upperBound + 1,
                limit: limit,
                depth: depth + 1
            )
        default:
            return nil
        }
    }

    /// For a dictionary whose keys are strings (`a{s…}`): calls `body` with each key, in place, and a reader on its
    /// value, in wire order, until `body` returns `false`. `false` when the current value is no such dictionary (an
    /// empty one is not looked into: check ``signatureText`` when that matters).
    @discardableResult
    package func forEachStringKeyedEntry(_ body: (DBusString, inout DBusArgumentReader) -> Bool) -> Bool {
        guard elementTypeCode == UInt8(ascii: "e"), var entries = contents else { return false }
        while entries.typeCode == UInt8(ascii: "e") {
            guard var entry = entries.contents, entry.currentCode == UInt8(ascii: "s"), let key = entry.stringBytes
            else { return false }
            entry.next()
            if !body(DBusString(bytes: key), &entry) { return true }
            entries.next()
        }
        return true
    }

    // MARK: The wire format

    /// The current value's type code as written in the signature, or `nil` at the end.
    var currentCode: UInt8? {
        if repeats {
            guard !types.isEmpty, offset < limit else { return nil }
            return types[0]
        }
        guard typeIndex < types.count else { return nil }
        return types[typeIndex]
    }

    /// Ends the walk: what follows a value that does not fit cannot be found.
    mutating func stop() {
        typeIndex = types.count
        offset = limit
    }

    /// For an array: the range of its elements in ``body``.
    var arrayContents: Range<Int>? {
        guard currentCode == UInt8(ascii: "a"), typeIndex + 1 < types.count else { return nil }
        return Self.arrayRange(of: types[typeIndex + 1], at: offset, in: body, limit: limit, bigEndian)
    }

    /// The bytes of `range` in `body`, in place.
    static func buffer(_ body: UnsafeRawBufferPointer, _ range: Range<Int>) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(
            start: body.baseAddress.map { $0.advanced(by: range.lowerBound).assumingMemoryBound(to: UInt8.self) },
            count: range.count
        )
    }

    /// Where the text of a string or object path (a 32-bit length first) or of a signature (`g`, an 8-bit length)
    /// that starts at `offset` lies, without the NUL after it; `nil` when it or its NUL does not fit before `limit`.
    static func textRange(
        _ code: UInt8,
        at offset: Int,
        in body: UnsafeRawBufferPointer,
        limit: Int,
        _ bigEndian: Bool
    ) -> Range<Int>? {
        let start: Int
        let length: Int
        if code == UInt8(ascii: "g") {
            guard offset >= 0, offset < limit else { return nil }
            (start, length) = (offset + 1, Int(body[offset]))
        } else {
            let lengthAt = align(offset, 4)
            guard let value = readUInt32(body, at: lengthAt, limit: limit, bigEndian) else { return nil }
            (start, length) = (lengthAt + 4, Int(value))
        }
        guard length < limit - start, body[start + length] == 0 else { return nil }
        return start..<(start + length)
    }

    /// Where the elements of an array of `element`s that starts at `offset` lie (after its length, padded to the
    /// elements' alignment even when there are none); `nil` when they do not fit before `limit`.
    static func arrayRange(
        of element: UInt8,
        at offset: Int,
        in body: UnsafeRawBufferPointer,
        limit: Int,
        _ bigEndian: Bool
    ) -> Range<Int>? {
        let lengthAt = align(offset, 4)
        guard let length = readUInt32(body, at: lengthAt, limit: limit, bigEndian) else { return nil }
        let first = align(lengthAt + 4, alignment(element))
        guard first <= limit, Int(length) <= limit - first else { return nil }
        return first..<(first + Int(length))
    }

    static func readUInt32(_ body: UnsafeRawBufferPointer, at position: Int, limit: Int, _ bigEndian: Bool) -> UInt32? {
        guard position >= 0, position <= limit - 4 else { return nil }
        let raw = body.loadUnaligned(fromByteOffset: position, as: UInt32.self)
        return bigEndian ? UInt32(bigEndian: raw) : UInt32(littleEndian: raw)
    }

    /// The code callers see: libdbus's `r` and `e` for a structure and a dictionary entry.
    static func publicCode(_ code: UInt8) -> UInt8 {
        switch code {
        case UInt8(ascii: "("): UInt8(ascii: "r")
        case UInt8(ascii: "{"): UInt8(ascii: "e")
        default: code
        }
    }

    static func align(_ offset: Int, _ alignment: Int) -> Int {
        (offset + alignment - 1) & ~(alignment - 1)
    }

    /// The alignment of a value of the type that starts with `code`.
    static func alignment(_ code: UInt8) -> Int {
        switch code {
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "b"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "h"), UInt8(ascii: "s"),
            UInt8(ascii: "o"), UInt8(ascii: "a"):
            4
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): 8
        default: 1
        }
    }

    /// The size of a fixed-size basic type, or `nil` for another.
    static func fixedSize(_ code: UInt8) -> Int? {
        switch code {
        case UInt8(ascii: "y"): 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "b"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "h"): 4
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"): 8
        default: nil
        }
    }

    /// The index just past the complete type that starts at `index` in `types`, or `nil` if it is not one.
    static func typeEnd(_ types: UnsafeBufferPointer<UInt8>, _ index: Int, depth: Int) -> Int? {
        guard index < types.count, depth <= maximumDepth else { return nil }
        switch types[index] {
        case UInt8(ascii: "a"):
            return typeEnd(types, index + 1, depth: depth + 1)
        case UInt8(ascii: "("), UInt8(ascii: "{"):
            let close = types[index] == UInt8(ascii: "(") ? UInt8(ascii: ")") : UInt8(ascii: "}")
            var next = index + 1
            while next < types.count, types[next] != close {
                guard let end = typeEnd(types, next, depth: depth + 1) else { return nil }
                next = end
            }
            return next < types.count && next > index + 1 ? next + 1 : nil
        case UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"), UInt8(ascii: "v"):
            return index + 1
        case let code:
            return fixedSize(code) != nil ? index + 1 : nil
        }
    }

    /// Where the value of the complete type at `index` in `types`, starting at `offset` in `body`, ends, and where
    /// its type ends; `nil` when it does not fit within `limit` or its type is not one.
    static func valueEnd(
        _ types: UnsafeBufferPointer<UInt8>,
        _ index: Int,
        at offset: Int,
        in body: UnsafeRawBufferPointer,
        limit: Int,
        _ bigEndian: Bool,
        depth: Int
    ) -> (offset: Int, typeIndex: Int)? {
        guard index < types.count, depth <= maximumDepth else { return nil }
        let code = types[index]
        switch code {
        case UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"):
            guard let text = textRange(code, at: offset, in: body, limit: limit, bigEndian) else { return nil }
            return (text.upperBound + 1, index + 1)
        case UInt8(ascii: "a"):
            guard index + 1 < types.count,
                let elements = arrayRange(of: types[index + 1], at: offset, in: body, limit: limit, bigEndian),
                let elementEnd = typeEnd(types, index + 1, depth: depth + 1)
            else { return nil }
            return (elements.upperBound, elementEnd)
        case UInt8(ascii: "("), UInt8(ascii: "{"):
            let close = code == UInt8(ascii: "(") ? UInt8(ascii: ")") : UInt8(ascii: "}")
            var position = align(offset, 8)
            var next = index + 1
            while next < types.count, types[next] != close {
                guard let end = valueEnd(types, next, at: position, in: body, limit: limit, bigEndian, depth: depth + 1)
                else { return nil }
                (position, next) = end
            }
            guard next < types.count, position <= limit else { return nil }
            return (position, next + 1)
        case UInt8(ascii: "v"):
            guard let signature = textRange(UInt8(ascii: "g"), at: offset, in: body, limit: limit, bigEndian),
                let end = valueEnd(
                    buffer(body, signature),
                    0,
                    at: signature.upperBound + 1,
                    in: body,
                    limit: limit,
                    bigEndian,
                    depth: depth + 1
                ),
                end.typeIndex == signature.count
            else { return nil }
            return (end.offset, index + 1)
        default:
            guard let size = fixedSize(code) else { return nil }
            let start = align(offset, alignment(code))
            guard start <= limit - size else { return nil }
            return (start + size, index + 1)
        }
    }
}

/// A string inside a received message, compared in place and copied only on demand.
package struct DBusString {
    /// Its UTF-8 bytes, without the NUL that ends it on the wire.
    let bytes: UnsafeBufferPointer<UInt8>

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Whether it equals `expected`.
    package func equals(_ expected: StaticString) -> Bool { Self.equal(bytes, expected) }

    /// Whether it equals `expected`.
    package func equals(_ expected: String) -> Bool { Self.equal(bytes, expected) }

    /// The text (copied; bytes that are not UTF-8 are repaired).
    package var string: String { String(decoding: bytes, as: UTF8.self) }

    static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ expected: StaticString) -> Bool {
        expected.withUTF8Buffer { expectedBytes in equal(bytes, expectedBytes) }
    }

    static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ expected: String) -> Bool {
        var expected = expected
        return expected.withUTF8 { expectedBytes in equal(bytes, expectedBytes) }
    }

    /// Byte for byte, with `memcmp`: these comparisons run several times for every signal.
    static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ expected: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == expected.count else { return false }
        guard let base = bytes.baseAddress, let expectedBase = expected.baseAddress else { return true }
        return memcmp(base, expectedBase, bytes.count) == 0
    }
}
