extension QRCode {
    /// The symbol as lines of text for a terminal, two module rows to a line, with its quiet zone of ``quietZone``
    /// modules on each side: a phone's camera reads it off the screen.
    ///
    /// Each character stands for a module column of two rows, and its ink marks the *light* modules: `█` both,
    /// `▀` the upper, `▄` the lower, a space neither. The quiet zone is drawn too, so the symbol is dark on light
    /// wherever the terminal paints its text lighter than its background, as most terminals do; with `colors` each
    /// line also sets white text on a black background (ANSI SGR 97 and 40) and resets it at its end, so it reads on
    /// a light theme as well. A symbol has an odd number of rows with its quiet zone: the last line's lower half is
    /// light, a half module more of quiet zone.
    ///
    /// - Parameter colors: Whether to set the colours with ANSI escape sequences: for a terminal, not for a file or
    ///   a pipe (nor when `NO_COLOR` is set).
    /// - Returns: `(size + 8 + 1) / 2` lines of `size + 8` characters, each ending in a line feed.
    package func terminalText(colors: Bool = false) -> String {
        let side = size + 2 * Self.quietZone
        /// Whether the module at (`x`, `y`) of the symbol with its quiet zone is light; beyond it, light too.
        func isLight(_ x: Int, _ y: Int) -> Bool {
            let column = x - Self.quietZone
            let row = y - Self.quietZone
            guard column >= 0, column < size, row >= 0, row < size else { return true }
            return !self[column, row]
        }
        var output = ""
        output.reserveCapacity((side + 12) * (side + 1) / 2 * 3)
        for top in stride(from: 0, to: side, by: 2) {
            if colors { output += "\u{1B}[97;40m" }
            for x in 0..<side {
                switch (isLight(x, top), isLight(x, top + 1)) {
                case (true, true): output += "█"
                case (true, false): output += "▀"
                case (false, true): output += "▄"
                case (false, false): output += " "
                }
            }
            if colors { output += "\u{1B}[0m" }
            output += "\n"
        }
        return output
    }
}
