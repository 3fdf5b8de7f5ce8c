import GotchuCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One packet as a scanner hears it.
public struct Reception: Hashable, Sendable {
    /// The index of the advertising peer in its ``AirCore``.
    public var advertiser: Int
    /// When it was received.
    public var time: Duration
    /// Received signal strength in dBm.
    public var rssi: Int16
    /// What the packet carried.
    public var payload: AirPayload
}

/// The discrete-event heart of the simulator: given who advertises what, when and where, it generates every packet a
/// scanner receives in a time range. No clocks, no tasks: the virtual-time trial runner and the real-time
/// ``SimulatedRadio`` both drive it.
///
/// It is deterministic: each advertising period has its own event schedule and each link its own random streams, all
/// derived from the seed, so the packets a scanner receives do not depend on how its queries split time, on which
/// other scanners exist, or on the order scanners are queried in. Queries for one scanner must move forward in time.
public struct AirCore: Sendable {
    /// The propagation model.
    public let model: AirModel
    /// The seed every random stream is derived from.
    public let seed: UInt64
    /// The peers, indexed by the value ``addPeer(_:)`` returned.
    public private(set) var peers: [SimulatedPeer] = []

    private struct Period {
        var id: UInt64
        var start: Duration
        var stop: Duration?
        var interval: Duration
        /// Payload changes in time order; the first starts with the period.
        var payloads: [(from: Duration, payload: AirPayload)]

        func payload(at time: Duration) -> AirPayload {
            payloads.last { $0.from <= time }?.payload ?? payloads[0].payload
        }
    }

    private struct LinkKey: Hashable {
        var advertiser: Int
        var scanner: Int
        var period: UInt64
    }

    private struct PairKey: Hashable {
        var advertiser: Int
        var scanner: Int
    }

    /// The advertiser's event schedule as replayed for one scanner, plus that link's per-packet randomness.
    private struct LinkState {
        var schedule: Xoshiro256StarStar
        var packets: Xoshiro256StarStar
        var nextEvent: Duration
    }

    private struct Shadowing {
        var random: Xoshiro256StarStar
        var value: Double?
        var time: Duration = .zero
    }

    private var periods: [Int: [Period]] = [:]
    private var links: [LinkKey: LinkState] = [:]
    private var shadowing: [PairKey: Shadowing] = [:]
    private var blocking: [PairKey: Double] = [:]
    private var nextPeriodID: UInt64 = 1
    private static let maximumAdvDelayNanoseconds: Int64 = 10_000_000

    /// Creates an empty room.
    public init(model: AirModel = AirModel(), seed: UInt64) {
        self.model = model
        self.seed = seed
    }

    /// Adds a peer and returns its index.
    public mutating func addPeer(_ peer: SimulatedPeer) -> Int {
        peers.append(peer)
        return peers.count - 1
    }

    /// Whether `peer` is advertising at `time`.
    public func isAdvertising(_ peer: Int, at time: Duration) -> Bool {
        guard let last = periods[peer]?.last else { return false }
        return last.start <= time && (last.stop.map { time < $0 } ?? true)
    }

    /// Starts advertising `payload` from `peer` at `time`, every `interval` (the peer's own by default) plus advDelay.
    /// A peer advertises one payload at a time: a running period is stopped first.
    public mutating func startAdvertising(
        _ peer: Int,
        payload: AirPayload,
        interval: Duration? = nil,
        at time: Duration
    ) {
        stopAdvertising(peer, at: time)
        let period = Period(
            id: nextPeriodID,
            start: time,
            interval: max(interval ?? peers[peer].advertisingInterval, .milliseconds(20)),
            payloads: [(time, payload)]
        )
        nextPeriodID += 1
        periods[peer, default: []].append(period)
    }

    /// Replaces what `peer` advertises from `time` on, without restarting its schedule.
    public mutating func updateAdvertising(_ peer: Int, payload: AirPayload, at time: Duration) {
        guard isAdvertising(peer, at: time) else { return }
        let last = periods[peer]!.count - 1
        periods[peer]![last].payloads.append((time, payload))
    }

    /// Stops `peer` advertising at `time`; events at or after `time` are not sent.
    public mutating func stopAdvertising(_ peer: Int, at time: Duration) {
        guard let last = periods[peer]?.indices.last, periods[peer]![last].stop == nil else { return }
        periods[peer]![last].stop = max(time, periods[peer]![last].start)
    }

    /// Every packet `scanner` receives with a time in `[start, end)`, in time order.
    ///
    /// `scanOrigin` is when the scanner started scanning; its scan windows repeat every scan interval from there.
    public mutating func receptions(
        for scanner: Int,
        from start: Duration,
        to end: Duration,
        scanOrigin: Duration = .zero
    ) -> [Reception] {
        var result: [Reception] = []
        for (advertiser, advertiserPeriods) in periods where advertiser != scanner {
            for period in advertiserPeriods {
                if let stop = period.stop, stop <= start { continue }
                if period.start >= end { continue }
                collect(
                    advertiser: advertiser,
                    scanner: scanner,
                    period: period,
                    until: end,
                    emitFrom: start,
                    scanOrigin: scanOrigin,
                    into: &result
                )
            }
        }
        result.sort { $0.time != $1.time ? $0.time < $1.time : $0.advertiser < $1.advertiser }
        return result
    }

    private mutating func collect(
        advertiser: Int,
        scanner: Int,
        period: Period,
        until end: Duration,
        emitFrom start: Duration,
        scanOrigin: Duration,
        into result: inout [Reception]
    ) {
        let key = LinkKey(advertiser: advertiser, scanner: scanner, period: period.id)
        var link =
            links[key]
            ?? {
                var schedule = Xoshiro256StarStar(seed: SplitMix64.derive(seed, 1, UInt64(advertiser), period.id))
                let first = period.start + Self.advDelay(&schedule)
                return LinkState(
                    schedule: schedule,
                    packets: Xoshiro256StarStar(
                        seed: SplitMix64.derive(seed, 2, UInt64(advertiser), UInt64(scanner), period.id)
                    ),
                    nextEvent: first
                )
            }()
        let limit = min(end, period.stop ?? end)
        while link.nextEvent < limit {
            let time = link.nextEvent
            link.nextEvent = time + period.interval + Self.advDelay(&link.schedule)
            // Every event draws the same numbers whether or not it is emitted, so results do not depend on how
            // queries split time.
            let lost = link.packets.unit() < model.packetLoss
            let fading = link.packets.gaussian() * model.fastFadingSigma
            let shadow = shadowingValue(advertiser: advertiser, scanner: scanner, at: time)
            guard time >= start, !lost, isListening(scanner, at: time, origin: scanOrigin) else { continue }
            let payload = period.payload(at: time)
            let distance = max(
                model.minimumDistance,
                peers[advertiser].trajectory.position(at: time).distance(
                    to: peers[scanner].trajectory.position(at: time)
                )
            )
            let power =
                Double(peers[advertiser].txPower) + peers[advertiser].transmitOffset + peers[scanner].receiveOffset
                - blockingLoss(advertiser: advertiser, scanner: scanner) - model.lossAtOneMetre - 10
                * model.pathLossExponent * log10(distance) + shadow + fading
            guard power >= model.sensitivity else { continue }
            let rssi = Int16(
                min(Double(model.rssiRange.upperBound), max(Double(model.rssiRange.lowerBound), power.rounded()))
            )
            result.append(Reception(advertiser: advertiser, time: time, rssi: rssi, payload: payload))
        }
        // A link whose period has stopped and whose last event is behind it will never be queried again.
        if let stop = period.stop, link.nextEvent >= stop, end >= stop {
            links[key] = nil
        } else {
            links[key] = link
        }
    }

    /// The link's body-blocking loss, drawn once from its own stream.
    private mutating func blockingLoss(advertiser: Int, scanner: Int) -> Double {
        guard model.bodyBlockingProbability > 0 else { return 0 }
        let key = PairKey(advertiser: advertiser, scanner: scanner)
        if let loss = blocking[key] { return loss }
        var random = Xoshiro256StarStar(seed: SplitMix64.derive(seed, 4, UInt64(advertiser), UInt64(scanner)))
        let blocked = random.unit() < model.bodyBlockingProbability
        let loss = blocked ? random.unit() * model.bodyBlockingMaximumLoss : 0
        blocking[key] = loss
        return loss
    }

    /// Advances the link's Ornstein–Uhlenbeck shadowing to `time` and returns it.
    private mutating func shadowingValue(advertiser: Int, scanner: Int, at time: Duration) -> Double {
        let key = PairKey(advertiser: advertiser, scanner: scanner)
        var state =
            shadowing[key]
            ?? Shadowing(
                random: Xoshiro256StarStar(seed: SplitMix64.derive(seed, 3, UInt64(advertiser), UInt64(scanner)))
            )
        let sigma = model.shadowingSigma
        let draw = state.random.gaussian()
        if let previous = state.value {
            let tau = model.shadowingCorrelationTime.seconds
            let rho = tau > 0 ? exp(-max(0, (time - state.time).seconds) / tau) : 0
            state.value = rho * previous + sigma * (1 - rho * rho).squareRoot() * draw
        } else {
            state.value = sigma * draw
        }
        state.time = time
        shadowing[key] = state
        return state.value!
    }

    private func isListening(_ scanner: Int, at time: Duration, origin: Duration) -> Bool {
        let peer = peers[scanner]
        guard peer.scanWindow < peer.scanInterval else { return true }
        let elapsed = (time - origin).nanosecondsValue
        let interval = peer.scanInterval.nanosecondsValue
        guard elapsed >= 0, interval > 0 else { return false }
        return elapsed % interval < peer.scanWindow.nanosecondsValue
    }

    private static func advDelay(_ random: inout Xoshiro256StarStar) -> Duration {
        .nanoseconds(Int64(random.unit() * Double(maximumAdvDelayNanoseconds)))
    }
}

extension Duration {
    /// Whole nanoseconds (the simulation's resolution).
    var nanosecondsValue: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
