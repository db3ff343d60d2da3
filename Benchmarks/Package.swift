// swift-tools-version:6.1
// Benchmarks (ordo-one/benchmark): `swift package benchmark` in this folder.
import PackageDescription

let package = Package(
    name: "swift-video-capture-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-video-capture", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "Pipeline",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "VideoCapture", package: "swift-video-capture"),
                .product(name: "VideoProcessing", package: "swift-video-capture"),
                .product(name: "H264", package: "swift-video-capture"),
                .product(name: "Recording", package: "swift-video-capture"),
                .product(name: "FixtureCameras", package: "swift-video-capture"),
                .product(name: "RTP", package: "swift-video-capture"),
            ],
            path: "Benchmarks/Pipeline",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The library side of Benchmarks/compare (generates the shared raw frames, runs the library loop).
        .executableTarget(
            name: "compare-loop",
            dependencies: [
                .product(name: "VideoCapture", package: "swift-video-capture"),
                .product(name: "VideoProcessing", package: "swift-video-capture"),
                .product(name: "H264", package: "swift-video-capture"),
                .product(name: "Recording", package: "swift-video-capture"),
                .product(name: "FixtureCameras", package: "swift-video-capture"),
            ],
            path: "compare/CompareLoop" // outside Benchmarks/: not a benchmark target for the plugin
        ),
    ]
)
