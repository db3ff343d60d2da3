import CCameraPortal
public import VideoCapture

/// The xdg camera portal (`org.freedesktop.portal.Camera` on the session bus): how a sandboxed application (Flatpak)
/// reaches a camera, and how any application may. ``connection(timeoutMs:)`` asks for the camera (`AccessCamera`: the
/// desktop may ask the user) and, when granted, opens a PipeWire connection (`OpenPipeWireRemote`) that sees only the
/// cameras the application may use; ``PipeWireCameraProvider`` lists and streams over such connections when its
/// ``PipeWireCameraProvider/Configuration/connection`` says so.
///
/// Every call talks to the session bus on a private connection of its own (`DBUS_SESSION_BUS_ADDRESS`, else
/// `$XDG_RUNTIME_DIR/bus`; never an autolaunch) within one deadline, and closes it before it returns: any thread may
/// call at any time. Errors are typed: a refusal is `.permissionDenied` saying the portal refused, no portal (or no
/// session bus) is `.unknownDevice`, a deadline passed is `.timeout`.
public enum CameraPortal {
    /// How long a call may wait by default, milliseconds: access may show the user a dialog.
    public static let defaultTimeoutMs = Int(SVC_CAMERA_PORTAL_DEFAULT_TIMEOUT_MS)

    /// Asks for the camera, then for a PipeWire connection: the descriptor (close-on-exec), which the caller owns and
    /// gives to PipeWire. Throws `.permissionDenied` when the portal refuses (xdg-desktop-portal 1.16 answers a
    /// refusal with response 1, "cancelled").
    public static func connection(timeoutMs: Int = defaultTimeoutMs) throws(CaptureError) -> Int32 {
        var response: UInt32 = 0
        var fd: Int32 = -1
        var error = [CChar](repeating: 0, count: 512)
        let r = svc_camera_portal_acquire(Int32(clamping: timeoutMs), &response, &fd, &error, error.count)
        guard r == SVC_CAMERA_PORTAL_OK, fd >= 0 else { throw failure(r, error, operation: "AccessCamera, OpenPipeWireRemote") }
        return fd
    }

    /// Whether the portal knows a camera now (`IsCameraPresent`). A hint only: xdg-desktop-portal 1.16 counts the
    /// cameras present when it started, not those added later.
    public static func isCameraPresent(timeoutMs: Int = 2000) throws(CaptureError) -> Bool {
        var present: Int32 = 0
        var version: UInt32 = 0
        var error = [CChar](repeating: 0, count: 512)
        let r = svc_camera_portal_is_present(Int32(clamping: timeoutMs), &present, &version, &error, error.count)
        guard r == SVC_CAMERA_PORTAL_OK else { throw failure(r, error, operation: "IsCameraPresent") }
        return present != 0
    }

    /// The typed error for a return code, with the client's sentence.
    static func failure(_ code: Int32, _ error: [CChar], operation: String) -> CaptureError {
        let text = error.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        switch code {
        case SVC_CAMERA_PORTAL_E_REFUSED, SVC_CAMERA_PORTAL_E_NOT_ALLOWED:
            return CaptureError(.permissionDenied, text, operation: operation) // "the camera portal refused access to the camera (…)"
        case SVC_CAMERA_PORTAL_E_NO_BUS, SVC_CAMERA_PORTAL_E_NO_PORTAL:
            return CaptureError(.unknownDevice, "no camera portal: \(text)", operation: operation)
        case SVC_CAMERA_PORTAL_E_TIMEOUT:
            return CaptureError(.timeout, "the camera portal did not answer in time: \(text)", operation: operation)
        default:
            return CaptureError(.unknownDevice, "the camera portal failed: \(text)", operation: operation)
        }
    }
}
