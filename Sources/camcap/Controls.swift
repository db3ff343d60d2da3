import ArgumentParser
import VideoCapture

struct Controls: CamcapCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, read and set a camera's controls (in the layout of `v4l2-ctl --list-ctrls-menus`).",
        discussion: """
            NAME is the control's v4l2-ctl name (brightness, power_line_frequency), a well-known alias \
            (exposure_absolute) or its id (0x00980900). VALUE is a number, a menu entry's name ("50 Hz") or \
            true/false. --set values are applied in order and what the camera applied is printed; a value out of \
            range, a read-only or an inactive control is an error naming the control and the value.
            """)
    @Option(name: .shortAndLong, help: "Device: /dev/videoN, fixture:NAME or a fixture file (default: the first camera, else fixture:uvc-webcam).")
    var device: String?
    @Option(
        name: .customLong("set"), help: ArgumentHelp("Set a control (repeatable, applied in order).", valueName: "name=value"),
        transform: parsing(CameraControlSetting.init(parsing:), "--set expects NAME=VALUE"))
    var settings: [CameraControlSetting] = []
    @Option(name: .customLong("get"), help: ArgumentHelp("Print one control's value (repeatable).", valueName: "name")) var gets: [String] = []
    @Flag(help: "Print JSON instead.") var json = false

    func execute() async throws {
        let capturer = makeCapturer()
        let d = try capturer.device(device ?? defaultCameraSpec)
        if settings.isEmpty && gets.isEmpty {
            let all = try capturer.controls(for: d)
            print(json ? ControlListing.json(all) : ControlListing.text(all), terminator: "")
            return
        }
        var out: [CameraControl] = []
        for s in settings {
            out.append(try capturer.setControl(s.control, to: s.value, on: d))
        }
        for g in gets { out.append(try capturer.control(g, of: d)) }
        if json { print(ControlListing.json(out), terminator: "") } else { for c in out { print("\(c.name): \(ControlListing.valueText(c))") } }
    }
}
