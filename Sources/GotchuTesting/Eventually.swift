/// Waits until `condition` holds, polling every 10 ms, for at most `timeout`; returns whether it held. The timeout
/// only bounds a hang: it is far longer than anything should take, even on a busy machine.
package func eventually(
    timeout: Duration = .seconds(300),
    _ condition: () async throws -> Bool
) async throws -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}
