import Foundation
import GotchuKiosk
import Testing

@Suite(.timeLimit(.minutes(10))) struct KioskChargeTests {
    @Test func finalStatesAreExactlyTheOutcomes() {
        let final = KioskChargeState.allCases.filter(\.isFinal)
        #expect(Set(final) == [.paid, .expired, .cancelled, .failed])
    }
}
