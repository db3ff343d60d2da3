import Foundation
import Testing
import VideoCapture
@testable import V4L2Capture

/// A camera's stable id: its `/dev/v4l/by-id` link (else `by-path`) that resolves to the node, the way udev writes
/// them (relative, `../../video0`), else its bus info. Read through SystemIO (readdir, readlink), not Foundation.
@Suite struct DeviceIdentityTests {
    @Test func theByIdLinkThatResolvesToTheNodeIsItsId() throws {
        let dev = fakeDev(), fm = FileManager.default
        try fm.createDirectory(atPath: dev + "/v4l/by-id", withIntermediateDirectories: true)
        try fm.createDirectory(atPath: dev + "/v4l/by-path", withIntermediateDirectories: true)
        try fm.createSymbolicLink(atPath: dev + "/v4l/by-id/usb-Other_Cam-video-index0", withDestinationPath: "../../video1")
        try fm.createSymbolicLink(atPath: dev + "/v4l/by-id/usb-Fake_Cam-video-index0", withDestinationPath: "../../video0")
        try fm.createSymbolicLink(atPath: dev + "/v4l/by-path/pci-0000:00:14.0-usb-0:1:1.0-video-index0", withDestinationPath: dev + "/video0")
        let provider = V4L2DeviceProvider(kernel: FakeKernel(), devDirectory: dev)
        #expect(provider.devices().map(\.uniqueID) == [dev + "/v4l/by-id/usb-Fake_Cam-video-index0"])
        try fm.removeItem(atPath: dev + "/v4l/by-id")
        #expect(provider.devices().map(\.uniqueID) == [dev + "/v4l/by-path/pci-0000:00:14.0-usb-0:1:1.0-video-index0"], "by-path when by-id has none")
        try fm.removeItem(atPath: dev + "/v4l")
        #expect(provider.devices().map(\.uniqueID) == ["v4l2:usb-fake-1"], "the bus info when there are no links")
    }

    @Test(arguments: [
        ("../../video0", "/dev/v4l/by-id", "/dev/video0"), ("/dev/video3", "/dev/v4l/by-path", "/dev/video3"),
        ("./../.././video2", "/dev/v4l/by-id", "/dev/video2"), ("../../../../../video4", "/dev/v4l/by-id", "/video4"),
    ])
    func linkDestinationsResolveByName(destination: String, directory: String, expected: String) {
        #expect(V4L2DeviceProvider.resolve(destination, in: directory) == expected)
    }
}
