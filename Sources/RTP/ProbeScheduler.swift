/// When probe packets go out, as a value: frames in, probe packet requests out. A probe cluster (the estimator's
/// `startProbe`) starts at a frame that may carry it and is spread over `frames` frames; each frame's own bytes
/// count towards it, and after each frame a request asks for the rest of that frame's share as probe packets (the
/// sender makes them RTX copies of its newest packets; an encoder that undershoots its target so gets more copies,
/// and the cluster still reaches its rate). A frame that must not carry probe packets (a key frame, packets still
/// queued) is skipped; after `frames` frames, or 10 skipped, the cluster is complete.
///
/// Not thread-safe: the sender keeps it in its `CongestionController`, under its lock.
package struct ProbeScheduler: Sendable {
    /// The cluster being sent: its id, the bytes still to send, the frames left to send them after, the frames
    /// skipped.
    package struct Cluster: Sendable, Equatable {
        /// The cluster's id (`SendSideBandwidthEstimator.packetSent`'s `probeCluster`).
        package var id: UInt8
        /// The bytes still to send (the frames' own and the probe packets).
        package var bytes: Int
        /// The frames left to spread them over.
        package var frames: Int
        /// The frames that could not carry the cluster.
        package var skipped = 0
    }

    /// What a frame asks for after its own packets: `bytes` of probe packets tagged with `cluster`.
    package struct Request: Sendable, Equatable {
        /// The cluster the packets belong to.
        package var cluster: UInt8
        /// About how many bytes of probe packets to send now.
        package var bytes: Int
    }

    /// The frames a cluster is spread over (`RTPSender.probeFrames`).
    package let frames: Int
    /// The cluster being sent, if any.
    package private(set) var cluster: Cluster?

    /// A scheduler spreading each cluster over `frames` frames.
    package init(frames: Int) { self.frames = frames }

    /// The id the packets sent now carry (0: no cluster is being sent).
    package var clusterID: UInt8 { cluster?.id ?? 0 }

    /// A frame starts at `nowUs`: when it may carry a probe (`mayStart`) and none is being sent, a cluster the
    /// estimator has due starts with it. True when one started.
    package mutating func frameStarts(mayStart: Bool, estimator: inout SendSideBandwidthEstimator, nowUs: Int64) -> Bool {
        guard mayStart, cluster == nil, let p = estimator.startProbe(nowUs: nowUs) else { return false }
        cluster = Cluster(id: p.cluster, bytes: p.bytes, frames: frames)
        return true
    }

    /// A frame's own packets left (`frameBytes` of them, the cluster's since they carry its id): the probe packets to
    /// add after them, if any. A `skip`ped frame asks for none.
    package mutating func frameSent(bytes frameBytes: Int, skip: Bool) -> Request? {
        guard !skip, var c = cluster else { return nil }
        let share = c.bytes / max(1, c.frames)
        c.bytes -= min(c.bytes, frameBytes)
        cluster = c
        let quota = share - frameBytes
        return quota > 0 ? Request(cluster: c.id, bytes: quota) : nil
    }

    /// One probe packet of `bytes` left.
    package mutating func probePacketSent(bytes: Int) {
        guard var c = cluster else { return }
        c.bytes -= min(c.bytes, bytes)
        cluster = c
    }

    /// The frame (and its probe packets) done, or `skipped`: true when the cluster is complete (the scheduler then
    /// forgets it, and the caller tells the estimator, `endProbe`).
    package mutating func frameDone(skipped: Bool) -> Bool {
        guard var c = cluster else { return false }
        if skipped { c.skipped += 1 } else { c.frames -= 1 }
        if c.frames <= 0 || c.skipped >= 10 {
            cluster = nil
            return true
        }
        cluster = c
        return false
    }
}
