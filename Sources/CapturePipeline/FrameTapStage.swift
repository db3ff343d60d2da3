import Foundation
public import VideoCapture
public import VideoProcessing

/// Publishes every picture the encoders get into a `FrameTap` (shared memory that local processes read), beside
/// the other stages, never waiting for a reader. The session's source converts each picture straight into the ring
/// slot it is published in (`FrameTap.destination(width:height:)`), so the tap copies nothing; a picture made
/// elsewhere (the source's own size while a sink wants less, a slot a stage still holds) is copied once.
///
/// It keeps the camera running while a reader is connected (``wantsPictures``), and a reader who connects while a
/// server's camera is released for want of viewers starts it again.
public final class FrameTapStage: PictureStage {
    /// The tap (its socket path, readers, counters).
    public let tap: FrameTap

    /// Makes the tap named `name` (see `FrameTap.socketPath(name:runtimeDirectory:)`: in `$XDG_RUNTIME_DIR`, else
    /// /tmp, or the path itself when it has a `/`), before the camera starts: a tap already running there is refused.
    public convenience init(name: String, configuration: FrameTap.Configuration = FrameTap.Configuration()) throws {
        let path = try FrameTap.socketPath(name: name, runtimeDirectory: ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"])
        self.init(tap: try FrameTap(socketPath: path, configuration: configuration))
    }

    /// A stage over a tap made by the caller.
    public init(tap: FrameTap) { self.tap = tap }

    /// The source converting into the ring's slots, until `end`.
    private var source: VideoSource?

    /// Has the session's source convert its pictures into the ring, from the first frame on.
    public func prepare(_ source: VideoSource) {
        self.source = source
        source.setPictureDestination { [tap] width, height in tap.destination(width: width, height: height) }
    }

    /// Lets a reader who connects while the camera is released start it again.
    public func begin(_ session: CaptureSession) throws { tap.whenReaderArrives(session.wakeAction) }

    /// Publishes the picture (converted into its slot, or copied there) with the frame's capture time, rotation,
    /// number and range.
    public func consume(_ picture: I420Buffer, frame: VideoFrame) throws {
        tap.publish(
            picture, timestampNs: frame.timestampNs, rotation: frame.rotation, cameraSequence: frame.sequence,
            fullRange: frame.colorSpace.range == .full)
    }

    /// Stops serving the socket (the ring is marked retired) and removes its file.
    public func end() throws { discard() }
    /// The same as `end`.
    public func discard() {
        source?.setPictureDestination(nil)
        source = nil
        tap.close()
    }
    /// True while a reader is connected.
    public var wantsPictures: Bool { tap.readers > 0 }
    /// "tap N readers".
    public var progress: String? { "tap \(tap.readers) readers" }
    /// The socket, frames published, readers, copies and rings (the summary's `tap` line).
    public var report: StageReport {
        var r = FrameTapReport(socketPath: tap.socketPath)
        (r.published, r.copied, r.connections) = (tap.published, tap.published - tap.publishedInPlace, tap.connections)
        (r.skipped, r.busy, r.generation) = (tap.skipped, tap.busy, tap.generation)
        return .frameTap(r)
    }
}
