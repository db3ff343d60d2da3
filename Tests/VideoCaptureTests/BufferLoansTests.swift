import Synchronization
import Testing
@testable import VideoCapture

/// The ledger both providers that read another library's buffers in place (libcamera, PipeWire) lend them by.
@Suite struct BufferLoansTests {
    /// Counts the mapping references taken and let go.
    final class Mapping: Sendable {
        let taken = Atomic<Int>(0), released = Atomic<Int>(0)
        func retain() -> (@Sendable () -> Void)? {
            taken.add(1, ordering: .relaxed)
            return { [self] in released.add(1, ordering: .relaxed) }
        }
    }

    @Test func lendsWhileTwoStayThenEachReleasedSlotComesBackOnce() {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: 4 * 64, alignment: 64)
        defer { memory.deallocate() }
        let mapping = Mapping()
        var loans = BufferLoans(slots: 4)
        var frames: [Int: FrameStorage] = [:]
        for slot in 0..<4 {
            guard loans.canLend(slot) else { continue }
            let s = loans.storage(slot, base: UnsafeRawPointer(memory + slot * 64), capacity: 64, retain: mapping.retain)
            #expect(s?.isBorrowed == true && s?.baseAddress == UnsafeRawPointer(memory + slot * 64))
            loans.lend(slot)
            frames[slot] = s
        }
        // Two of four lent: two stay with the library.
        #expect(frames.keys.sorted() == [0, 1] && loans.count == 2 && !loans.canLend(2) && !loans.canLend(0))
        #expect(!loans.canLend(-1) && !loans.canLend(4))
        var back: [Int] = []
        loans.returned { back.append($0) }
        #expect(back.isEmpty, "frames still hold both")
        frames[1] = nil
        loans.returned { back.append($0) }
        loans.returned { back.append($0) }
        #expect(back == [1] && loans.count == 1 && loans.canLend(1))
        // A slot lent again keeps its storage (one mapping reference per slot, not per frame).
        do {
            let again = loans.storage(1, base: UnsafeRawPointer(memory + 64), capacity: 64, retain: mapping.retain)
            #expect(again != nil && mapping.taken.load(ordering: .relaxed) == 2)
        }
        // Its memory moved: a new storage; the old one, which no frame holds, lets its reference go.
        do {
            let moved = loans.storage(1, base: UnsafeRawPointer(memory + 3 * 64), capacity: 64, retain: mapping.retain)
            #expect(moved?.baseAddress == UnsafeRawPointer(memory + 3 * 64) && mapping.taken.load(ordering: .relaxed) == 3)
        }
        #expect(mapping.released.load(ordering: .relaxed) == 1)
    }

    @Test func noMappingReferenceMeansNoStorage() {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 64)
        defer { memory.deallocate() }
        var loans = BufferLoans(slots: 3)
        #expect(loans.storage(0, base: UnsafeRawPointer(memory), capacity: 64, retain: { nil }) == nil)
        #expect(loans.storage(7, base: UnsafeRawPointer(memory), capacity: 64, retain: { {} }) == nil)
        // Three slots keep two with the library: one loan at a time.
        #expect(loans.canLend(0))
        loans.lend(0)
        #expect(!loans.canLend(1) && !loans.canLend(2))
    }
}
