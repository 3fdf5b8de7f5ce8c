#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Starts a detached thread that runs `body` and ends with it; the `pthread_create` status, 0 when it started.
/// Connections run on threads of their own, never on Swift's cooperative pool: they block in `poll`.
func startThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let status = pthread_create(
        &thread,
        nil,
        { argument in
            guard let argument else { return nil }
            Unmanaged<Box>.fromOpaque(argument).takeRetainedValue().body()
            return nil
        },
        box
    )
    if status == 0 {
        pthread_detach(thread)
    } else {
        Unmanaged<Box>.fromOpaque(box).release()
    }
    return status
}
