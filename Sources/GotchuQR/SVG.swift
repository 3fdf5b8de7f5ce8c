extension QRCode {
    /// The light margin around the symbol that readers need to find it, in modules (the standard's minimum).
    package static let quietZone = 4

    /// The symbol as a standalone SVG document: a white square of `size + 8` units (the symbol and its quiet zone of
    /// ``quietZone`` modules on each side), one unit a module, with the dark modules drawn as one black `<path>`.
    ///
    /// The document has a `viewBox` and no `width` or `height`, so it takes the size its container gives it (set
    /// one in CSS, or the `width` of an `<img>`); `shape-rendering="crispEdges"` keeps the modules' edges sharp at
    /// any scale. It loads nothing from outside, carries a `<title>` (its accessible name, with `role="img"`), and
    /// is the same for the same symbol and title.
    ///
    /// - Parameter title: The text of the `<title>`, escaped for XML here; `nil` (the default) uses the encoded
    ///   ``text``. Characters that XML 1.0 cannot carry (most control characters) become U+FFFD.
    /// - Returns: The document, UTF-8 text without an XML declaration, ready to be served as `image/svg+xml` or
    ///   put inline in an HTML page.
    package func svg(title: String? = nil) -> String {
        let side = size + 2 * Self.quietZone
        var output = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(side) \(side)\""
        output += " shape-rendering=\"crispEdges\" role=\"img\"><title>"
        output += Self.escapedForXML(title ?? text)
        output += "</title><rect width=\"\(side)\" height=\"\(side)\" fill=\"#fff\"/><path fill=\"#000\" d=\""
        output += pathData
        output += "\"/></svg>"
        return output
    }

    /// One closed rectangle per horizontal run of dark modules, row by row: `M{x} {y}h{length}v1H{x}z`, in the
    /// coordinates of the SVG document (shifted by the quiet zone).
    var pathData: String {
        var output = ""
        for y in 0..<size {
            var x = 0
            while x < size {
                guard self[x, y] else {
                    x += 1
                    continue
                }
                let start = x
                while x < size && self[x, y] { x += 1 }
                let left = start + Self.quietZone
                output += "M\(left) \(y + Self.quietZone)h\(x - start)v1H\(left)z"
            }
        }
        return output
    }

    /// `text` as XML character data or an attribute value: `&`, `<`, `>`, `"` and `'` as entities, a carriage
    /// return as `&#13;` (so that a parser does not turn it into a line feed), and each character that XML 1.0 does
    /// not allow (controls other than tab, line feed and carriage return; U+FFFE, U+FFFF) as U+FFFD.
    static func escapedForXML(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&apos;"
            case "\r": output += "&#13;"
            case "\t", "\n": output.unicodeScalars.append(scalar)
            case "\u{0}"..."\u{1F}", "\u{FFFE}", "\u{FFFF}": output += "\u{FFFD}"
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output
    }
}
