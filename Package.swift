// swift-tools-version:6.0
import PackageDescription

let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "swift-video-capture",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "VideoCaptureCommons", targets: ["VideoCaptureCommons"]),
        .library(name: "VideoCapture", targets: ["VideoCapture"]),
        .library(name: "VideoProcessing", targets: ["VideoProcessing"]),
        .library(name: "FixtureCameras", targets: ["FixtureCameras"]),
        .library(name: "V4L2Capture", targets: ["V4L2Capture"]),
        .library(name: "PipeWireCapture", targets: ["PipeWireCapture"]),
        .library(name: "LibCameraCapture", targets: ["LibCameraCapture"]),
        .library(name: "H264", targets: ["H264"]),
        .library(name: "Recording", targets: ["Recording"]),
        .library(name: "RTP", targets: ["RTP"]),
        .library(name: "WebRTC", targets: ["WebRTC"]),
        .library(name: "CapturePipeline", targets: ["CapturePipeline"]),
        .library(name: "WHEPServer", targets: ["WHEPServer"]),
        .library(name: "WHIPClient", targets: ["WHIPClient"]),
        .library(name: "RTSPServer", targets: ["RTSPServer"]),
        .executable(name: "camcap", targets: ["camcap"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.70.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.27.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        // Documentation only: `swift package generate-documentation` (Scripts/docs.sh) builds the DocC catalogues.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // Tests only: HummingbirdWHEPTests drives the WHEP endpoint from a Hummingbird application.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // System libraries: thin shims, never part of the public API.
        .systemLibrary(name: "CV4L2", pkgConfig: "libv4l2", providers: [.apt(["libv4l-dev"])]),
        .systemLibrary(name: "CLibYUV", providers: [.apt(["libyuv-dev"])]),
        .systemLibrary(name: "COpenH264", pkgConfig: "openh264", providers: [.apt(["libopenh264-dev"])]),
        .systemLibrary(name: "CTurboJPEG", pkgConfig: "libturbojpeg", providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "CLibPipeWire", pkgConfig: "libpipewire-0.3", providers: [.apt(["libpipewire-0.3-dev"])]),
        // What Swift cannot call in libpipewire (varargs, SPA pod macros, spa_hook listeners) behind a small C API.
        .target(name: "CPipeWire", dependencies: ["CLibPipeWire"]),
        // libcamera 0.0.3+ (a C++ library): CLibCameraShim's small C API is the one place that calls it.
        .systemLibrary(name: "CLibCamera", pkgConfig: "libcamera", providers: [.apt(["libcamera-dev"])]),
        .target(name: "CLibCameraShim", dependencies: ["CLibCamera"]),
        // The xdg camera portal (org.freedesktop.portal.Camera) over libdbus-1: access, then a PipeWire connection.
        .systemLibrary(name: "CDBus", pkgConfig: "dbus-1", providers: [.apt(["libdbus-1-dev"])]),
        .target(name: "CCameraPortal", dependencies: ["CDBus"], linkerSettings: [.linkedLibrary("dbus-1")]),
        // The MJPEG decoder and the fixture cameras' strip encoder over libjpeg(-turbo) (libjpeg-dev).
        .target(name: "CJPEGCodec", linkerSettings: [.linkedLibrary("jpeg")]),

        // The one I/O layer: sockets, files, memory maps, sleeping and threads (EINTR and errno handled in one
        // place), and the byte-order helpers. Below every module; V4L2 device calls stay in V4L2Capture/Kernel.swift.
        .target(name: "SystemIO", swiftSettings: upcoming),
        // What every module shares: error codes, the clocks, JSON text, bounded file reads (below VideoCapture, so
        // that the transports and servers need not import the capture module for them).
        .target(name: "VideoCaptureCommons", dependencies: ["SystemIO"], swiftSettings: upcoming),
        .target(
            name: "VideoCapture",
            dependencies: ["VideoCaptureCommons", "SystemIO", .product(name: "Logging", package: "swift-log")],
            swiftSettings: upcoming),
        .target(
            name: "VideoProcessing",
            dependencies: [
                "VideoCapture", "SystemIO", "CLibYUV", "CTurboJPEG", "CJPEGCodec", .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: upcoming),
        // The built-in cameras (Fixtures/cameras/*.json|txt) are compiled in at build time by the EmbedFixtures plugin,
        // and the simulated bcm2835-codec encoder node, played to V4L2Capture's M2M encoder through its kernel seam
        // (V4L2Capture, CV4L2).
        .target(
            name: "FixtureCameras",
            dependencies: ["VideoCapture", "VideoProcessing", "H264", "SystemIO", "VideoCaptureCommons", "V4L2Capture", "CV4L2"],
            exclude: ["README.md"],
            swiftSettings: upcoming,
            plugins: ["EmbedFixtures"]),
        // Writes FixtureCameras' BuiltinCameras.swift from Fixtures/cameras/ (run by the plugin; not installed).
        .executableTarget(name: "embed-fixtures"),
        .plugin(name: "EmbedFixtures", capability: .buildTool(), dependencies: ["embed-fixtures"]),
        .target(
            name: "V4L2Capture",
            dependencies: ["VideoCapture", "SystemIO", "CV4L2", "H264"],
            swiftSettings: upcoming),
        // Cameras behind PipeWire (issue #52): camera nodes listed, negotiated and streamed through CPipeWire.
        .target(
            name: "PipeWireCapture",
            dependencies: ["VideoCapture", "VideoCaptureCommons", "SystemIO", "CPipeWire", "CCameraPortal"],
            swiftSettings: upcoming),
        // Cameras behind libcamera (issue #52): CSI sensor pipelines and the like, through CLibCameraShim.
        .target(
            name: "LibCameraCapture",
            dependencies: ["VideoCapture", "VideoCaptureCommons", "SystemIO", "CLibCameraShim"],
            swiftSettings: upcoming),
        // A PipeWire camera of our own (frames with a counter and known bytes, optionally padded rows): the tests'
        // camera, and a way to try `pipewire:` devices without one (Scripts/pipewire-session.sh runs it headless).
        .executableTarget(name: "pw-test-camera", dependencies: ["CLibPipeWire"]),
        .target(
            name: "H264",
            dependencies: ["VideoCapture", "SystemIO", "COpenH264", .product(name: "Metrics", package: "swift-metrics")],
            swiftSettings: upcoming),
        // Recordings above the codec: the MP4 box writer, the fragmented MP4 writer on it, the Annex-B writer with
        // its one flush policy, and the segment ring (naming, rotation, deletion) that RecordingOutput cuts files with.
        .target(name: "Recording", dependencies: ["H264", "VideoCapture", "VideoProcessing", "SystemIO"], swiftSettings: upcoming),
        .target(name: "RTP", dependencies: ["VideoCaptureCommons", "VideoCapture", "H264", "SystemIO"], swiftSettings: upcoming),
        // OpenSSL (DTLS 1.2 + use_srtp, ECDSA certificate, HMAC) and libsrtp2 behind a thin C shim.
        .target(name: "CWebRTC", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto"), .linkedLibrary("srtp2")]),
        .target(name: "WebRTC", dependencies: ["VideoCaptureCommons", "RTP", "H264", "SystemIO", "CWebRTC"], swiftSettings: upcoming),
        // The capture session, its stages and outputs (files, RTP): what every command runs, without the CLI. Its
        // cameras' providers (V4L2Capture, FixtureCameras, an app's own) are given to it, not built in.
        .target(
            name: "CapturePipeline",
            dependencies: [
                "VideoCapture", "VideoProcessing", "H264", "Recording", "RTP", "SystemIO",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: upcoming),
        // One TCP server on SwiftNIO for WHEP and RTSP alike: the listening socket, admission against the connection
        // limits (overall, per address, per network; eviction of the connection idle longest), refusals, the
        // per-connection deadline and the stop. Each protocol puts its own handlers in an admitted connection.
        .target(
            name: "ServerShell",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: upcoming),
        // WHEP (RFC 9725) to many browsers from one encode: the viewers, a framework-neutral endpoint (request in,
        // response out), its SwiftNIO HTTP/1.1 host and the player page.
        .target(
            name: "WHEPServer",
            dependencies: [
                "CapturePipeline", "VideoCapture", "VideoProcessing", "VideoCaptureCommons", "H264", "RTP", "WebRTC", "SystemIO", "ServerShell",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            swiftSettings: upcoming),
        // WHIP (RFC 9725) publishing: the HTTP exchange and an encoded output that publishes the encode to a
        // media server (Janus, any WHIP server), reconnecting with backoff.
        .target(
            name: "WHIPClient",
            dependencies: [
                "CapturePipeline", "VideoCapture", "VideoProcessing", "VideoCaptureCommons", "H264", "RTP", "WebRTC", "SystemIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcoming),
        // RTSP 1.0 (RFC 2326) to ffmpeg, VLC, GStreamer and go2rtc/MediaMTX from one encode: the request parser,
        // the sessions (UDP or TCP interleaved), Digest authentication and the SwiftNIO host.
        .target(
            name: "RTSPServer",
            dependencies: [
                "CapturePipeline", "VideoCaptureCommons", "VideoCapture", "VideoProcessing", "H264", "RTP", "SystemIO", "ServerShell",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcoming),
        .executableTarget(
            name: "camcap",
            dependencies: [
                "CapturePipeline", "WHEPServer", "WHIPClient", "RTSPServer", "VideoCapture", "VideoProcessing", "FixtureCameras", "V4L2Capture",
                "PipeWireCapture", "LibCameraCapture", "H264", "RTP",
                "SystemIO", // SystemIO: signal dispositions and exit (Scripts/check-syscalls.sh)
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),

        // Examples (built with the package, run by the tests): an app that embeds the WHEP server with a route of its
        // own, and one that consumes VideoSource frames in its own code.
        .executableTarget(
            name: "embedded-whep-example",
            dependencies: ["CapturePipeline", "WHEPServer", "VideoCapture", "WebRTC", "FixtureCameras", "V4L2Capture"],
            path: "Examples/EmbeddedWHEP"),
        .executableTarget(
            name: "frame-consumer-example", dependencies: ["CapturePipeline", "VideoCapture", "VideoProcessing", "FixtureCameras", "V4L2Capture"],
            path: "Examples/FrameConsumer"),

        // Runs inside the qemu VM against the kernel's vivid driver (Scripts/vivid-vm-test.sh).
        .executableTarget(
            name: "vivid-check",
            // CV4L2: the H.264 feeder; Recording: the FWHT file in v4l2-ctl's --stream-to-hdr layout (M2MCheck).
            dependencies: ["VideoCapture", "V4L2Capture", "VideoProcessing", "FixtureCameras", "H264", "Recording", "CV4L2"],
            swiftSettings: [.swiftLanguageMode(.v5)]), // a linear test script

        // Fixtures/: the one home of the fixture data (Fixtures/README.md). A target of its own (one Swift file that
        // locates the folder for the tests) so that SwiftPM watches the folder: a camera file added or removed
        // re-plans the build and reruns EmbedFixtures.
        .target(
            name: "FixtureFiles", path: "Fixtures",
            exclude: ["README.md", "cameras", "corpus", "v4l2", "json", "h264", "mjpeg", "rtcp", "rtsp", "sdp", "webrtc", "quirks", "negotiation"],
            sources: ["FixtureFiles.swift"]),
        .target(name: "TestSupport", dependencies: ["FixtureFiles", "VideoCaptureCommons"], path: "Tests/TestSupport"),
        // Test pictures, ffmpeg as the reference and the shipped fixture files, for the tests of pictures and cameras.
        .target(
            name: "MediaTestSupport", dependencies: ["VideoCapture", "VideoProcessing", "FixtureCameras", "TestSupport"],
            path: "Tests/MediaTestSupport"),
        .testTarget(
            name: "VideoCaptureTests",
            dependencies: ["VideoCapture", "VideoProcessing", "FixtureCameras", "MediaTestSupport", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "VideoProcessingTests", dependencies: ["VideoCapture", "VideoProcessing", "FixtureCameras", "MediaTestSupport"]),
        .testTarget(
            name: "FixtureCamerasTests",
            dependencies: ["VideoCapture", "VideoProcessing", "FixtureCameras", "MediaTestSupport", "TestSupport", "V4L2Capture", "H264", "CV4L2"]),
        .testTarget(
            name: "H264Tests",
            dependencies: ["VideoCapture", "VideoProcessing", "FixtureCameras", "V4L2Capture", "H264", "Recording", "MediaTestSupport"]),
        // The recordings judged by ffprobe, GStreamer, mkvmerge and mediainfo, and the box writer's bytes.
        .testTarget(
            name: "RecordingTests", dependencies: ["Recording", "H264", "VideoCapture", "VideoProcessing", "FixtureCameras", "MediaTestSupport"]),
        // PipeWire cameras against a headless PipeWire (Scripts/pipewire-session.sh) and pw-test-camera; camcap's
        // devices and record from them.
        .testTarget(name: "PipeWireTests", dependencies: ["PipeWireCapture", "VideoCapture", "TestSupport", "pw-test-camera", "camcap"]),
        // libcamera on a host without cameras: nothing listed at once, a missing camera named, formats and negotiation
        // (the camera itself is judged in the VM on vimc: Scripts/vm-libcamera.sh).
        .testTarget(
            name: "LibCameraTests", dependencies: ["LibCameraCapture", "CLibCameraShim", "VideoCapture", "FixtureCameras", "TestSupport", "camcap"]),
        .testTarget(name: "V4L2CaptureTests", dependencies: ["VideoCapture", "V4L2Capture", "CV4L2", "TestSupport", "H264"]),
        .testTarget(
            name: "CamcapTests",
            dependencies: [
                "camcap", "embedded-whep-example", "frame-consumer-example", "WHEPServer", "WHIPClient", "WebRTC", "CapturePipeline", "VideoCapture",
                "VideoProcessing", "FixtureCameras", "H264", "TestSupport",
            ]),
        .testTarget(name: "SystemIOTests", dependencies: ["SystemIO"]),
        .testTarget(name: "WHIPClientTests", dependencies: ["WHIPClient", "WebRTC", "VideoCapture", "CapturePipeline", "FixtureCameras"]),
        .testTarget(
            name: "CapturePipelineTests",
            dependencies: [
                "CapturePipeline", "VideoCapture", "VideoProcessing", "FixtureCameras", "H264", "RTP", "TestSupport",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]),
        .testTarget(
            name: "RTSPServerTests",
            dependencies: [
                "RTSPServer", "CapturePipeline", "FixtureCameras", "H264", "RTP", "VideoCapture", "VideoCaptureCommons", "VideoProcessing",
                "TestSupport",
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]),
        // The link simulator: the production RTPSender on a simulated clock behind a simulated token bucket.
        .target(name: "RTPTestSupport", dependencies: ["RTP", "H264", "TestSupport"], path: "Tests/RTPTestSupport"),
        .testTarget(
            name: "RTPTests", dependencies: ["RTP", "H264", "SystemIO", "VideoCapture", "FixtureCameras", "TestSupport", "RTPTestSupport"]),
        .testTarget(name: "WebRTCTests", dependencies: ["WebRTC", "RTP", "H264", "CWebRTC", "TestSupport"]),
        // The README's Swift blocks (and its Package.swift lines) and misuse that must not compile, compiled with
        // swiftc against the modules this build made.
        .testTarget(
            name: "UsageTests",
            dependencies: [
                "VideoCapture", "V4L2Capture", "FixtureCameras", "VideoProcessing", "H264", "Recording", "RTP", "WebRTC", "CapturePipeline",
                "WHEPServer", "RTSPServer", "TestSupport",
            ]),
        // WHEPServer in-process, no browser: the endpoint driven directly, the tier rules, the serve defaults, and
        // the TCP server shell's limits (ServerShell) alone and through HTTPServer.
        .testTarget(
            name: "WHEPServerTests",
            dependencies: [
                "WHEPServer", "ServerShell", "CapturePipeline", "WebRTC", "VideoCapture", "VideoCaptureCommons", "FixtureCameras", "TestSupport",
                "RTPTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]),
        // The framework-neutral WHEP endpoint behind Hummingbird routes (Hummingbird is a test-only dependency).
        .testTarget(
            name: "HummingbirdWHEPTests",
            dependencies: [
                "WHEPServer", "WebRTC", "VideoCapture", "TestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]),
    ],
    cxxLanguageStandard: .cxx17
)
