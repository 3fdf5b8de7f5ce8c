public import Foundation

/// Files only their owner may read: cached tokens, secrets, pinned receipt keys.
public enum PrivateFile {
    /// Writes `contents` to `file`, readable by its owner only (0600), creating its directory owner-only (0700) if
    /// needed. Written whole, then renamed over the file: a crash leaves the old contents or the new, never half.
    /// - Throws: ``PrivateFileError`` naming the path that could not be written.
    public static func write(_ contents: Data, to file: URL) throws(PrivateFileError) {
        let directory = file.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw PrivateFileError("cannot create \(directory.path): \(error.localizedDescription)")
        }
        // The process id keeps two processes writing the same file from sharing a temporary.
        let temporary = file.appendingPathExtension("tmp-\(getpid())")
        guard
            FileManager.default.createFile(
                atPath: temporary.path,
                contents: contents,
                attributes: [.posixPermissions: 0o600]
            )
        else { throw PrivateFileError("cannot write \(temporary.path)") }
        guard rename(temporary.path, file.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw PrivateFileError("cannot write \(file.path): \(reason)")
        }
    }
}

/// A private file that could not be written.
public struct PrivateFileError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
