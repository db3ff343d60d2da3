import Foundation
import Testing
import TestSupport

/// The camera portal (`--pipewire portal`, `CameraPortal`, `cpw_*_fd`) against a headless xdg-desktop-portal with a
/// fake permission dialog (Scripts/camera-portal-session.sh, Scripts/fake-portal-access.py): access granted lists
/// and records the test camera over the portal's PipeWire connection; access refused fails by name, before any
/// camera is opened. Each case runs one session: camcap and the test camera inside it.
@Suite(.serialized, .timeLimit(.minutes(2))) struct CameraPortalTests {
    /// Runs `script` (sh) inside a portal session that grants or refuses camera access; the test camera
    /// `portal-cam` is started first and waited for on the direct socket (the portal's own view is what is tested).
    static func inSession(_ mode: String, _ script: String) throws -> (code: Int32, output: String) {
        let camcap = builtProduct("camcap"), camera = builtProduct("pw-test-camera")
        let prelude = """
            "\(camera)" --name portal-cam --fps 30 >/dev/null 2>&1 &
            i=0; until "\(camcap)" devices --pipewire direct | grep -q '^pipewire:portal-cam'; do
              i=$((i+1)); [ $i -gt 400 ] && { echo "the test camera did not appear" >&2; exit 9; }; sleep 0.025
            done
            """
        // Started as `Child` (every signal unblocked): the session's daemons must answer SIGTERM at its end.
        let log = scratchDirectory("pipewire-tests") + "/portal-\(mode).log"
        let child = try Child(
            repositoryRoot + "/Scripts/camera-portal-session.sh", [mode, "--", "sh", "-c", prelude + "\n" + script],
            environment: ProcessInfo.processInfo.environment, output: log)
        guard waitUntil(timeout: 90, every: 0.02, { !child.isRunning }) else {
            child.stop()
            throw PipeWireTestError(description: "the portal session did not end within 90 s")
        }
        return (child.exitCode ?? -1, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    @Test func grantedAccessListsAndRecordsThroughThePortal() throws {
        let camcap = builtProduct("camcap")
        let file = scratchDirectory("pipewire-tests") + "/portal.mp4"
        try? FileManager.default.removeItem(atPath: file)
        let r = try Self.inSession(
            "grant",
            """
            "\(camcap)" devices --pipewire portal | grep pipewire: || exit 7
            "\(camcap)" record -d pipewire:portal-cam --pipewire portal --frames 20 -o "\(file)"
            """)
        #expect(r.code == 0, "\(r.output)")
        #expect(r.output.contains("pipewire:portal-cam\tTest camera (pw-test-camera)"), "\(r.output)")
        let probe = try runTool(
            "ffprobe", ["-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames,width,height", "-of", "csv=p=0", file])
        #expect(probe.out.trimmingCharacters(in: .whitespacesAndNewlines) == "640,480,20", "\(probe)")
    }

    @Test func refusedAccessFailsByName() throws {
        let camcap = builtProduct("camcap")
        let r = try Self.inSession(
            "refuse",
            """
            echo "listed $("\(camcap)" devices --pipewire portal | grep -c pipewire:)"
            "\(camcap)" record -d pipewire:portal-cam --pipewire portal --frames 20 -o /dev/null
            """)
        #expect(r.code == 1, "\(r.output)")
        #expect(r.output.contains("listed 0"), "a refused portal lists no PipeWire camera: \(r.output)")
        #expect(r.output.contains("camcap: error: the camera portal refused access to the camera"), "\(r.output)")
    }
}
