/// Buffers of another library lent to frames (libcamera's requests, PipeWire's buffers), by slot: which are out,
/// each slot's storage over the library's memory (made at its first loan and kept while that memory stays where it
/// is), and how many buffers must always stay with the library (a frame beyond them is copied instead). Used on
/// the one thread that receives the library's buffers; nothing is allocated per frame.
package struct BufferLoans {
    /// Per slot: its memory as a storage (whose release lets the library's mapping go).
    private var storages: [FrameStorage?]
    /// Per slot: its frame was handed on, and the buffer waits for consumers to let it go.
    private var onLoan: [Bool]
    /// Buffers lent now.
    package private(set) var count = 0
    /// Buffers that always stay with the library.
    package let keptWithOwner: Int

    /// `slots` buffers, of which `keptWithOwner` always stay with their library.
    package init(slots: Int, keptWithOwner: Int = 2) {
        storages = Array(repeating: nil, count: max(slots, 0))
        onLoan = Array(repeating: false, count: max(slots, 0))
        self.keptWithOwner = keptWithOwner
    }

    /// Whether `slot` may be lent now: a known slot, not out already, and enough buffers left with the library.
    package func canLend(_ slot: Int) -> Bool {
        slot >= 0 && slot < onLoan.count && !onLoan[slot] && count + keptWithOwner < onLoan.count
    }

    /// Slot `slot`'s storage over `base` (`capacity` bytes), made now when it has none or its memory moved, with the
    /// release `retain` gives (nil: no storage, and the frame is copied).
    package mutating func storage(
        _ slot: Int, base: UnsafeRawPointer, capacity: Int, retain: () -> (@Sendable () -> Void)?
    ) -> FrameStorage? {
        guard slot >= 0 && slot < storages.count else { return nil }
        if storages[slot] == nil || storages[slot]!.baseAddress != base {
            guard let release = retain() else { return nil }
            storages[slot] = FrameStorage(borrowing: UnsafeMutableRawPointer(mutating: base), capacity: capacity, release: release)
        }
        return storages[slot]
    }

    /// Marks `slot` lent (its frame is handed on).
    package mutating func lend(_ slot: Int) {
        onLoan[slot] = true
        count += 1
    }

    /// Calls `requeue` with each lent slot whose frame every consumer has let go (once each).
    package mutating func returned(_ requeue: (Int) -> Void) {
        guard count > 0 else { return }
        var i = 0
        while i < onLoan.count {
            if onLoan[i], isKnownUniquelyReferenced(&storages[i]) {
                onLoan[i] = false
                count -= 1
                requeue(i)
            }
            i += 1
        }
    }
}
