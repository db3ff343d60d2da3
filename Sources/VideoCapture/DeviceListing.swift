/// A list of cameras as text (a line per camera: path, name, position, driver, bus; its unique id under it when
/// that is not the path) or as JSON (`camcap devices`).
public enum DeviceListing {
    /// One line per camera, tab-separated, and `\tid: …` under a camera whose unique id is not its path.
    public static func text(_ devices: [CaptureDevice]) -> String {
        devices.map { d in
            let driver = d.driver.isEmpty ? "" : ", \(d.driver)"
            let bus = d.busInfo.isEmpty || d.busInfo.hasPrefix("fixture") ? "" : ", \(d.busInfo)"
            return "\(d.path)\t\(d.name)\t[\(d.position.rawValue)\(driver)\(bus)]\n" + (d.uniqueID != d.path ? "\tid: \(d.uniqueID)\n" : "")
        }.joined()
    }

    /// A JSON array with an object per camera: path, uniqueID, name, position, driver, busInfo.
    public static func json(_ devices: [CaptureDevice]) -> String {
        let items = devices.map { d in
            jsonObject([
                ("path", d.path), ("uniqueID", d.uniqueID), ("name", d.name), ("position", d.position.rawValue), ("driver", d.driver),
                ("busInfo", d.busInfo),
            ])
        }
        return "[" + items.joined(separator: ",\n ") + "]\n"
    }
}
