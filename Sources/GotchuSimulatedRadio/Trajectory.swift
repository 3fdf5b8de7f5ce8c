import GotchuCore

/// A point on the floor, in metres.
public struct Position: Hashable, Sendable, Codable, CustomStringConvertible {
    /// East, in metres.
    public var x: Double
    /// North, in metres.
    public var y: Double

    /// A point `x` metres east and `y` metres north of the room's origin.
    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    /// The origin.
    public static let origin = Position(x: 0, y: 0)

    /// Euclidean distance in metres.
    public func distance(to other: Position) -> Double {
        ((x - other.x) * (x - other.x) + (y - other.y) * (y - other.y)).squareRoot()
    }

    public var description: String { "(\(x), \(y))" }
}

/// Where a peer is over time: standing still, walking through waypoints, or any scripted function of time.
public struct Trajectory: Sendable {
    private let positionAt: @Sendable (Duration) -> Position

    /// A trajectory given as a function of the simulation time.
    public init(_ position: @escaping @Sendable (Duration) -> Position) {
        self.positionAt = position
    }

    /// Standing still at `position`.
    public static func fixed(_ position: Position) -> Trajectory {
        Trajectory { _ in position }
    }

    /// Walking in straight lines between timed waypoints; before the first and after the last it stands still.
    public static func waypoints(_ points: [(time: Duration, position: Position)]) -> Trajectory {
        let points = points.sorted { $0.time < $1.time }
        precondition(!points.isEmpty, "a trajectory needs at least one waypoint")
        return Trajectory { time in
            guard let nextIndex = points.firstIndex(where: { $0.time > time }) else { return points.last!.position }
            guard nextIndex > 0 else { return points[0].position }
            let (from, to) = (points[nextIndex - 1], points[nextIndex])
            let fraction = (time - from.time).seconds / (to.time - from.time).seconds
            return Position(
                x: from.position.x + (to.position.x - from.position.x) * fraction,
                y: from.position.y + (to.position.y - from.position.y) * fraction
            )
        }
    }

    /// The position at `time`.
    public func position(at time: Duration) -> Position {
        positionAt(time)
    }
}

extension Duration {
    /// The duration closest to `seconds`.
    static func seconds(fraction seconds: Double) -> Duration {
        .nanoseconds(Int64((seconds * 1e9).rounded()))
    }
}
