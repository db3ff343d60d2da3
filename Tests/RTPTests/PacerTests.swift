import Foundation
import Synchronization
import Testing
@testable import RTP

/// The pacer (#21): queued packets leave at the rate, not as one burst; unpaced it refuses to queue; a key frame's
/// drop empties the queue; stopping sends what is left.
@Suite struct PacerTests {
    /// Records when each sequence number was delivered (the pacer's thread).
    final class Log: Sendable {
        let entries = Mutex<[(UInt16, Int64)]>([])
        let delivered = DispatchSemaphore(value: 0)
        func add(_ s: UInt16) {
            let now = Int64(DispatchTime.now().uptimeNanoseconds)
            entries.withLock { $0.append((s, now)) }
            delivered.signal()
        }
        var count: Int { entries.withLock { $0.count } }
    }

    @Test func packetsLeaveAtThePacingRate() throws {
        let log = Log()
        let pacer = Pacer(capacity: 64, maxPacket: 1250) { log.add($0) }
        pacer.setRate(1_000_000) // 1 Mbit/s: a 1250-byte packet every 10 ms
        for s in 0..<20 { #expect(pacer.enqueue(UInt16(s), bytes: 1250)) }
        pacer.stop() // what is still queued goes out at once
        let e = log.entries.withLock { $0 }
        #expect(e.map(\.0) == (0..<20).map { UInt16($0) }, "in order, none lost")
    }

    @Test func theSpreadFollowsTheRate() throws {
        let log = Log()
        let pacer = Pacer(capacity: 64, maxPacket: 1250) { log.add($0) }
        pacer.setRate(1_000_000)
        for s in 0..<10 { _ = pacer.enqueue(UInt16(s), bytes: 1250) }
        // 10 packets at 1 Mbit/s take about 90 ms after the first (the drain floor, 250 ms, is slower): wait for
        // each delivery, then look at the times.
        for _ in 0..<10 { _ = log.delivered.wait(timeout: .now() + 10) }
        let e = log.entries.withLock { $0 }
        #expect(e.count == 10)
        let spanMs = Double((e.last?.1 ?? 0) - (e.first?.1 ?? 0)) / 1e6
        #expect(spanMs >= 60 && spanMs < 1000, "10 packets at 1 Mbit/s spread over \(spanMs) ms")
        pacer.stop()
    }

    @Test func unpacedAndDroppedPackets() throws {
        let log = Log()
        let pacer = Pacer(capacity: 4, maxPacket: 1250) { log.add($0) }
        #expect(!pacer.enqueue(1, bytes: 100), "no rate: sent by the caller")
        pacer.setRate(8_000) // 1 kB/s: the queue stays
        for s in 0..<4 { _ = pacer.enqueue(UInt16(s), bytes: 1000) }
        #expect(!pacer.enqueue(9, bytes: 1000), "full: sent by the caller")
        let dropped = pacer.dropQueued()
        #expect(dropped >= 2 && pacer.queued == 0, "dropped \(dropped)")
        pacer.stop()
        #expect(log.count <= 4 - dropped)
    }
}
