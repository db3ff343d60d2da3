/// A first-in, first-out queue in a fixed ring of slots: nothing is allocated while it holds at most its capacity.
/// Appending to a full ring doubles it (rare: only while the consumer is behind); a caller that would rather drop
/// makes room first with `popFirst()`. Used by the frame streams and `DedicatedTaskExecutor`.
package struct Ring<Element> {
    private var slots: [Element?]
    private var head = 0
    package private(set) var count = 0

    package init(capacity: Int) { slots = Array(repeating: nil, count: max(1, capacity)) }

    package var isFull: Bool { count == slots.count }

    package mutating func append(_ element: Element) {
        if isFull {
            var bigger = [Element?](repeating: nil, count: slots.count * 2)
            for i in 0..<count { bigger[i] = slots[(head + i) % slots.count] }
            slots = bigger
            head = 0
        }
        slots[(head + count) % slots.count] = element
        count += 1
    }

    package mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head]
        slots[head] = nil
        head = (head + 1) % slots.count
        count -= 1
        return element
    }
}

extension Ring: Sendable where Element: Sendable {}
