internal import CGotchuDBus

/// Converts between ``DBusValue`` and libdbus message iterators. Everything here runs on a connection's loop thread.
enum DBusMarshalling {
    /// The D-Bus limit on total container nesting; deeper data from the bus is refused, not recursed into.
    static let maximumDepth = 64

    // Type codes as plain ints: the `DBUS_TYPE_*` macros are character literals Swift cannot import.
    static let typeInvalid: Int32 = 0
    static let typeArray = Int32(UInt8(ascii: "a"))
    static let typeVariant = Int32(UInt8(ascii: "v"))
    static let typeStruct = Int32(UInt8(ascii: "r"))
    static let typeDictEntry = Int32(UInt8(ascii: "e"))

    // MARK: Writing

    /// Appends `values` as the body of `message`.
    static func append(_ values: [DBusValue], to message: OpaquePointer) throws(DBusError) {
        for value in values { try value.validate() }
        let signature = values.map(\.type.signature).joined()
        guard signature.utf8.count <= DBusSignature.maximumLength else {
            throw DBusError(.invalidSignature, "the body's signature is longer than \(DBusSignature.maximumLength)")
        }
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        for value in values { try append(value, to: &iter) }
    }

    private static func append(_ value: DBusValue, to iter: inout DBusMessageIter) throws(DBusError) {
        let ok: Bool
        switch value {
        case .byte(var byte): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &byte) != 0
        case .boolean(let flag):
            var cFlag: dbus_bool_t = flag ? 1 : 0
            ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &cFlag) != 0
        case .int16(var number): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &number) != 0
        case .uint16(var number): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &number) != 0
        case .int32(var number): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &number) != 0
        case .uint32(var number): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &number) != 0
        case .int64(var number): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &number) != 0
        case .uint64(var number): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &number) != 0
        case .double(var number): ok = dbus_message_iter_append_basic(&iter, Int32(value.type.code), &number) != 0
        case .string(let text): ok = appendString(text, code: value.type.code, to: &iter)
        case .objectPath(let path): ok = appendString(path.rawValue, code: value.type.code, to: &iter)
        case .signature(let signature): ok = appendString(signature.rawValue, code: value.type.code, to: &iter)
        case .variant(let variant):
            try withContainer(typeVariant, signature: variant.value.type.signature, in: &iter) {
                sub throws(DBusError) in
                try append(variant.value, to: &sub)
            }
            return
        case .array(let array):
            if array.elementType == .byte {
                ok = appendByteArray(array, to: &iter)
            } else {
                try withContainer(typeArray, signature: array.elementType.signature, in: &iter) {
                    sub throws(DBusError) in
                    for element in array.elements { try append(element, to: &sub) }
                }
                return
            }
        case .dictionary(let dictionary):
            let entrySignature = "{" + dictionary.keyType.signature + dictionary.valueType.signature + "}"
            try withContainer(typeArray, signature: entrySignature, in: &iter) { sub throws(DBusError) in
                for entry in dictionary.entries {
                    try withContainer(typeDictEntry, signature: nil, in: &sub) { entryIter throws(DBusError) in
                        try append(entry.key, to: &entryIter)
                        try append(entry.value, to: &entryIter)
                    }
                }
            }
            return
        case .structure(let fields):
            try withContainer(typeStruct, signature: nil, in: &iter) { sub throws(DBusError) in
                for field in fields { try append(field, to: &sub) }
            }
            return
        }
        guard ok else { throw DBusError(.noMemory, "could not append \(value.type)") }
    }

    private static func appendString(_ text: String, code: UInt8, to iter: inout DBusMessageIter) -> Bool {
        text.withCString { pointer in
            var cString: UnsafePointer<CChar>? = pointer
            return dbus_message_iter_append_basic(&iter, Int32(code), &cString) != 0
        }
    }

    private static func appendByteArray(_ array: DBusArray, to iter: inout DBusMessageIter) -> Bool {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(array.elements.count)
        for case .byte(let byte) in array.elements { bytes.append(byte) }
        var sub = DBusMessageIter()
        guard dbus_message_iter_open_container(&iter, typeArray, "y", &sub) != 0 else { return false }
        let appended = bytes.withUnsafeBufferPointer { buffer in
            var base: UnsafePointer<UInt8>? = buffer.baseAddress
            if base == nil { return true }
            return dbus_message_iter_append_fixed_array(&sub, Int32(UInt8(ascii: "y")), &base, Int32(buffer.count))
                != 0
        }
        guard appended else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }

    private static func withContainer(
        _ type: Int32,
        signature: String?,
        in iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) throws(DBusError) -> Void
    ) throws(DBusError) {
        var sub = DBusMessageIter()
        let opened: Bool =
            if let signature {
                signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) != 0 }
            } else {
                dbus_message_iter_open_container(&iter, type, nil, &sub) != 0
            }
        guard opened else { throw DBusError(.noMemory, "could not open a container") }
        do {
            try body(&sub)
        } catch {
            dbus_message_iter_abandon_container(&iter, &sub)
            throw error
        }
        guard dbus_message_iter_close_container(&iter, &sub) != 0 else {
            throw DBusError(.noMemory, "could not close a container")
        }
    }

    // MARK: Reading

    /// Reads the whole body of `message`. Data that does not fit the model is an error, never a crash.
    static func read(from message: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        var values: [DBusValue] = []
        while dbus_message_iter_get_arg_type(&iter) != typeInvalid {
            values.append(try readValue(&iter, depth: 0))
            dbus_message_iter_next(&iter)
        }
        return values
    }

    private static func readValue(_ iter: inout DBusMessageIter, depth: Int) throws(DBusError) -> DBusValue {
        guard depth <= maximumDepth else { throw DBusError(.invalidArgs, "value nested too deeply") }
        let code = dbus_message_iter_get_arg_type(&iter)
        guard code > 0, code < 128 else { throw DBusError(.invalidArgs, "unknown type code \(code)") }
        switch UInt8(code) {
        case UInt8(ascii: "y"): return .byte(readBasic(&iter, as: UInt8.self))
        case UInt8(ascii: "b"): return .boolean(readBasic(&iter, as: dbus_bool_t.self) != 0)
        case UInt8(ascii: "n"): return .int16(readBasic(&iter, as: Int16.self))
        case UInt8(ascii: "q"): return .uint16(readBasic(&iter, as: UInt16.self))
        case UInt8(ascii: "i"): return .int32(readBasic(&iter, as: Int32.self))
        case UInt8(ascii: "u"): return .uint32(readBasic(&iter, as: UInt32.self))
        case UInt8(ascii: "x"): return .int64(readBasic(&iter, as: Int64.self))
        case UInt8(ascii: "t"): return .uint64(readBasic(&iter, as: UInt64.self))
        case UInt8(ascii: "d"): return .double(readBasic(&iter, as: Double.self))
        case UInt8(ascii: "s"): return .string(try readString(&iter))
        case UInt8(ascii: "o"):
            let text = try readString(&iter)
            guard let path = DBusObjectPath(rawValue: text) else { throw DBusError(.invalidArgs, "bad object path") }
            return .objectPath(path)
        case UInt8(ascii: "g"):
            let text = try readString(&iter)
            guard let signature = DBusSignature(rawValue: text) else {
                throw DBusError(.invalidSignature, "bad signature")
            }
            return .signature(signature)
        case UInt8(ascii: "v"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(DBusVariant(try readValue(&sub, depth: depth + 1)))
        case UInt8(ascii: "r"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != typeInvalid {
                fields.append(try readValue(&sub, depth: depth + 1))
                dbus_message_iter_next(&sub)
            }
            guard !fields.isEmpty else { throw DBusError(.invalidArgs, "empty structure") }
            return .structure(fields)
        case UInt8(ascii: "a"):
            return try readArray(&iter, depth: depth)
        default:
            // Unix file descriptors and anything newer are not modelled.
            throw DBusError(.notSupported, "unsupported D-Bus type code \(code)")
        }
    }

    private static func readArray(_ iter: inout DBusMessageIter, depth: Int) throws(DBusError) -> DBusValue {
        guard let cSignature = dbus_message_iter_get_signature(&iter) else {
            throw DBusError(.noMemory, "no array signature")
        }
        let text = String(validatingCString: cSignature)
        dbus_free(cSignature)
        guard let text, let type = DBusSignature.singleType(text) else {
            throw DBusError(.invalidSignature, "bad array signature")
        }
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)
        switch type {
        case .array(.byte):
            var base: UnsafePointer<UInt8>? = nil
            var count: Int32 = 0
            dbus_message_iter_get_fixed_array(&sub, &base, &count)
            guard count > 0, let base else { return .bytes([]) }
            let buffer = UnsafeBufferPointer(start: base, count: Int(count))
            return .array(DBusArray(elementType: .byte, elements: buffer.map { .byte($0) }))
        case .array(let elementType):
            var elements: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != typeInvalid {
                let element = try readValue(&sub, depth: depth + 1)
                guard element.type == elementType else { throw DBusError(.invalidArgs, "array element type differs") }
                elements.append(element)
                dbus_message_iter_next(&sub)
            }
            return .array(DBusArray(elementType: elementType, elements: elements))
        case .dictionary(let keyType, let valueType):
            var entries: [DBusDictionary.Entry] = []
            while dbus_message_iter_get_arg_type(&sub) == typeDictEntry {
                var entryIter = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &entryIter)
                let key = try readValue(&entryIter, depth: depth + 2)
                guard dbus_message_iter_next(&entryIter) != 0 else {
                    throw DBusError(.invalidArgs, "dictionary entry without a value")
                }
                let value = try readValue(&entryIter, depth: depth + 2)
                guard key.type == keyType, value.type == valueType else {
                    throw DBusError(.invalidArgs, "dictionary entry type differs")
                }
                entries.append(DBusDictionary.Entry(key: key, value: value))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(DBusDictionary(keyType: keyType, valueType: valueType, entries: entries))
        default:
            throw DBusError(.invalidSignature, "not an array signature")
        }
    }

    private static func readBasic<T: BitwiseCopyable>(_ iter: inout DBusMessageIter, as type: T.Type) -> T {
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: 1) { buffer in
            buffer[0] = 0
            dbus_message_iter_get_basic(&iter, buffer.baseAddress)
            return UnsafeRawPointer(buffer.baseAddress!).loadUnaligned(as: T.self)
        }
    }

    private static func readString(_ iter: inout DBusMessageIter) throws(DBusError) -> String {
        var pointer: UnsafePointer<CChar>? = nil
        dbus_message_iter_get_basic(&iter, &pointer)
        guard let pointer, let text = String(validatingCString: pointer) else {
            throw DBusError(.invalidArgs, "string is not valid UTF-8")
        }
        return text
    }
}
