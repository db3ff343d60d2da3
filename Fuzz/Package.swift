// swift-tools-version:6.0
// libFuzzer targets for every parser that reads outside input. Build and run them with Scripts/fuzz.sh
// (swift build --package-path Fuzz --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address …).
// One executable per parser: its main.swift hands its fuzz function to libFuzzer's driver (CFuzzer).
// Seeds live in the top-level Fixtures/ (by format: Fixtures/json, Fixtures/sdp, …; every crash ever found is kept
// there as a regression seed); Scripts/fuzz.sh maps each target to its folders (seeds_of).
//
// Adding a parser (e.g. RTCP or SDP from the RTP module when it lands): add an executable target below that
// depends on CFuzzer and its product, a Sources/Fuzz<Name>/main.swift like the others, seeds in a folder of
// Fixtures/ (Fixtures/README.md), and the name to the targets and to seeds_of in Scripts/fuzz.sh.
import PackageDescription

let package = Package(
    name: "swift-video-capture-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-video-capture", path: "..")
    ],
    targets: [
        .target(name: "CFuzzer"),
        .executableTarget(
            name: "FuzzListing",
            dependencies: [
                "CFuzzer", .product(name: "FixtureCameras", package: "swift-video-capture"),
                .product(name: "VideoCapture", package: "swift-video-capture"),
            ]),
        .executableTarget(
            name: "FuzzJSON",
            dependencies: [
                "CFuzzer", .product(name: "FixtureCameras", package: "swift-video-capture"),
                .product(name: "VideoCapture", package: "swift-video-capture"),
            ]),
        .executableTarget(
            name: "FuzzAnnexB",
            dependencies: ["CFuzzer", .product(name: "H264", package: "swift-video-capture")]),
        .executableTarget(
            name: "FuzzSPS",
            dependencies: ["CFuzzer", .product(name: "H264", package: "swift-video-capture")]),
        .executableTarget(name: "FuzzRTCP", dependencies: ["CFuzzer", .product(name: "RTP", package: "swift-video-capture")]),
        .executableTarget(name: "FuzzSDP", dependencies: ["CFuzzer", .product(name: "RTP", package: "swift-video-capture")]),
        .executableTarget(name: "FuzzRTSP", dependencies: ["CFuzzer", .product(name: "RTSPServer", package: "swift-video-capture")]),
        .executableTarget(name: "FuzzWebRTC", dependencies: ["CFuzzer", .product(name: "WebRTC", package: "swift-video-capture")]),
        .executableTarget(
            name: "FuzzMJPEG",
            dependencies: [
                "CFuzzer", .product(name: "VideoCapture", package: "swift-video-capture"),
                .product(name: "VideoProcessing", package: "swift-video-capture"),
            ]),
    ]
)
