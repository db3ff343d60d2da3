import SystemIO

/// The last packets sent, for retransmission on NACK: indexed by sequence number (slot = sequence & mask, so
/// consecutive numbers never collide; O(1) to store and to find), allocated once, with when each was last
/// resent and a budget: retransmissions may use at most `share` of the media bytes sent in the last second.
package struct RetransmissionHistory: Sendable {
    private var slots: [[UInt8]]
    private var lengths: [Int]
    private var sequences: [UInt16]
    private var resentNs: [Int64]
    private let mask: Int
    private var rates = RateWindow()
    private let share: Double
    private let allowance: Int
    /// The first packet of the last key frame sent.
    private var keyFrameStart: UInt16?
    /// Whether packets before `keyFrameStart` are of no use to the receiver any more (not resent).
    private let supersedes: Bool
    /// How many packets that key frame has (0 until `keyFrameEnds`): they are resent outside the budget.
    private var keyFramePackets = 0

    /// Room for at least `packets` (a power of two, 16...8192) of up to `packetCapacity` bytes each.
    /// Retransmissions may use `share` of the media bitrate, at least `allowance` bytes a second. With
    /// `keyFrameSupersedesEarlierPackets`, packets sent before the last key frame are not resent (`claim`).
    package init(packets: Int, packetCapacity: Int, share: Double, allowance: Int, keyFrameSupersedesEarlierPackets: Bool = true) {
        var size = 16
        while size < min(8192, packets) { size *= 2 }
        slots = (0..<size).map { _ in [UInt8](repeating: 0, count: packetCapacity) }
        lengths = [Int](repeating: 0, count: size)
        sequences = [UInt16](repeating: 0, count: size)
        resentNs = [Int64](repeating: .min, count: size)
        mask = size - 1
        self.share = share
        self.allowance = allowance
        supersedes = keyFrameSupersedesEarlierPackets
    }

    package var capacity: Int { mask + 1 }

    /// Keeps a copy of media packet `packet` (its sequence number read from its header), sent at `now`.
    package mutating func record(_ packet: UnsafeRawBufferPointer, at now: Int64) {
        let seq = packet.bigEndianUInt16(at: 2)
        let i = Int(seq) & mask
        slots[i].withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: packet.baseAddress!, byteCount: packet.count) }
        lengths[i] = packet.count
        sequences[i] = seq
        resentNs[i] = .min
        rates.addMedia(packet.count, at: now)
    }

    /// A key frame starts at packet `seq` (its packets are resent over the budget, see `keyFrameEnds`). If the
    /// history was made with `keyFrameSupersedesEarlierPackets`, from now on NACKs for packets before it are not
    /// served (a receiver that decodes from the key frame: resending what it supersedes would only delay it on a
    /// loaded link, and on a tier move the old tier's packets are of no use at all).
    package mutating func keyFrameStarts(at seq: UInt16) {
        keyFrameStart = seq
        keyFramePackets = 0
    }

    /// The key frame that `keyFrameStarts` began has `count` packets. They are resent even when the budget is
    /// spent: every later frame depends on them, and a lost key-frame packet left unrepaired freezes the picture
    /// until a new key frame (measured on a 5 → 0.5 Mbit/s step: the budget went on the old tier's packets and the
    /// new tier's key frame waited 1.4 s).
    package mutating func keyFrameEnds(count: Int) { keyFramePackets = max(0, count) }

    package enum Decision: Equatable, Sendable {
        /// Resend: the packet is in `packet(at:)`.
        case resend(slot: Int)
        /// Not in the history (overwritten or never sent), or resent less than an RTT ago.
        case ignored
        /// The retransmission budget is spent (the rest of the NACK is not served either).
        case overBudget
        /// Sent before the last key frame: superseded by it.
        case superseded
    }

    /// Whether packet `seq` is resent now (libwebrtc's rules): it must still be in the history, must not have
    /// been resent within `rttNs` (the NACK crossed the retransmission), and its `bytes` (with what the
    /// transport adds) must fit the budget. A resend is counted and stamped.
    package mutating func claim(_ seq: UInt16, extraBytes: Int, rttNs: Int64, at now: Int64) -> Decision {
        let i = Int(seq) & mask
        let resent = resentNs[i]
        guard sequences[i] == seq, lengths[i] > 0, resent == .min || now - resent >= rttNs else { return .ignored }
        if supersedes, let k = keyFrameStart, Int16(bitPattern: seq &- k) < 0 { return .superseded }
        let ofKeyFrame = keyFrameStart.map { Int(seq &- $0) < keyFramePackets } ?? false
        guard rates.spend(lengths[i] + extraBytes, share: share, allowance: allowance, at: now, always: ofKeyFrame) else { return .overBudget }
        resentNs[i] = now
        return .resend(slot: i)
    }

    /// Media packet `seq` if it is still kept (a probe resends recent packets; no budget, no stamp).
    package func recent(_ seq: UInt16) -> ArraySlice<UInt8>? {
        let i = Int(seq) & mask
        guard sequences[i] == seq, lengths[i] > 0 else { return nil }
        return packet(at: i)
    }

    /// The packet kept in `slot`.
    package func packet(at slot: Int) -> ArraySlice<UInt8> { slots[slot][0..<lengths[slot]] }

    /// Bytes per 100 ms over the last second, for media and for retransmissions (the budget).
    struct RateWindow: Sendable {
        private var media = [Int](repeating: 0, count: 10), resent = [Int](repeating: 0, count: 10)
        private var slot: Int64 = 0
        private mutating func advance(_ now: Int64) {
            let s = now / 100_000_000
            if s - slot >= 10 {
                for i in 0..<10 {
                    media[i] = 0
                    resent[i] = 0
                }
            } else {
                var k = slot
                while k < s {
                    k += 1
                    media[Int(k % 10)] = 0
                    resent[Int(k % 10)] = 0
                }
            }
            slot = max(slot, s)
        }
        mutating func addMedia(_ bytes: Int, at now: Int64) {
            advance(now)
            media[Int(slot % 10)] += bytes
        }
        /// Whether `bytes` more of retransmission stay within `share` of the media sent in the last second (at
        /// least `allowance`, so a low-rate stream can still repair a loss); counts them if so.
        /// With `always` they are counted whatever the budget says.
        mutating func spend(_ bytes: Int, share: Double, allowance: Int, at now: Int64, always: Bool = false) -> Bool {
            advance(now)
            let budget = max(Int(Double(media.reduce(0, +)) * share), allowance)
            guard always || resent.reduce(0, +) + bytes <= budget else { return false }
            resent[Int(slot % 10)] += bytes
            return true
        }
    }
}
