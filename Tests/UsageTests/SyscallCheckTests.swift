// Scripts/check-syscalls.sh (the one I/O layer, checked at link level) against this build and against a scratch
// copy of it with calls planted in RTP's objects, written each in a way a source grep misses.
import Foundation
import Testing
import TestSupport

/// One planted call: the Swift file (module RTP) and the name the check must report for it.
private struct Plant {
    var file: String
    var reported: String
    var source: String
}

private let plants: [Plant] = [
    Plant(
        file: "PlantedWrapped", reported: "fsync",
        source: """
            import Glibc
            func plantedWrapped(_ fd: Int32) {
                _ = fsync(
                    fd)
            }
            """),
    Plant(
        file: "PlantedTry", reported: "write",
        source: """
            import Glibc
            struct PlantedError: Error {}
            func plantedTry(_ fd: Int32, _ p: UnsafeRawPointer) throws {
                guard try write(fd, p, 1) == 1 else { throw PlantedError() }
            }
            """),
    Plant(
        file: "PlantedReference", reported: "close",
        source: """
            import Glibc
            func plantedReference() -> (Int32) -> Int32 {
                let f = close
                return f
            }
            """),
    Plant(
        file: "PlantedUnlisted", reported: "kill",
        source: """
            import Glibc
            func plantedUnlisted() -> Int32 { kill(getppid(), 0) }
            """),
    Plant(
        file: "PlantedOverlay", reported: "open",
        source: """
            import Glibc
            func plantedOverlay() -> Int32 { Glibc.open("/dev/null", O_RDONLY) }
            """),
    Plant(
        file: "PlantedLookup", reported: "dlsym",
        source: """
            import Glibc
            func plantedLookup() -> UnsafeMutableRawPointer? { dlsym(UnsafeMutableRawPointer(bitPattern: 0), "close") }
            """),
    Plant(
        file: "PlantedThread", reported: "Foundation.Thread",
        source: """
            import Foundation
            func plantedThread() { Thread { }.start() }
            """),
    // libv4l2's device calls belong to V4L2Capture/Kernel.swift: one declared by hand elsewhere (no CV4L2 import
    // for a grep to find) is still its undefined symbol.
    Plant(
        file: "PlantedV4L2", reported: "v4l2_ioctl",
        source: """
            @_silgen_name("v4l2_ioctl") func plantedV4L2Ioctl(_ fd: Int32, _ request: UInt, _ arg: UnsafeMutableRawPointer?) -> Int32
            func plantedV4L2(_ fd: Int32) -> Int32 { plantedV4L2Ioctl(fd, 0, nil) }
            """),
    // File-system calls and threads of the libraries go through SystemIO, not Foundation or Dispatch.
    Plant(
        file: "PlantedFileManager", reported: "FoundationEssentials.FileManager",
        source: """
            import Foundation
            func plantedFileManager() -> Data? { FileManager.default.contents(atPath: "/etc/hostname") }
            """),
    Plant(
        file: "PlantedDispatch", reported: "Dispatch.DispatchQueue",
        source: """
            import Dispatch
            func plantedDispatch() { DispatchQueue.global().async { } }
            """),
    Plant(
        file: "PlantedElsewhere", reported: "ioctl",
        source: """
            import Glibc
            func plantedElsewhere(_ fd: Int32) -> Int32 { ioctl(fd, 0) }
            """),
]

@Suite(.timeLimit(.minutes(2))) struct SyscallCheckTests {
    static let script = repositoryRoot + "/Scripts/check-syscalls.sh"

    @Test func theTreeCallsTheCLibraryOnlyAsAllowed() throws {
        let r = try runTool(Self.script, ["--build-dir", Compiler.buildDirectory.path])
        #expect(r.code == 0, "\(r.out)\(r.err)")
    }

    /// Each planted call is reported with its module, its name and its object file; the build's own objects
    /// beside them are not.
    @Test func catchesEveryPlantedCall() throws {
        let build = try plantedBuild()
        let r = try runTool(Self.script, ["--build-dir", build])
        #expect(r.code == 1, "\(r.out)\(r.err)")
        let lines = r.out.split(separator: "\n").map(String.init)
        for plant in plants {
            let object = "\(build)/RTP.build/\(plant.file).swift.o"
            #expect(
                lines.contains { $0.hasPrefix("RTP: uses \(plant.reported) ") && $0.hasSuffix(" in \(object)") },
                "\(plant.file): \(plant.reported) not reported:\n\(r.out)")
        }
        let unplanted = lines.filter { !$0.contains("/RTP.build/Planted") }
        #expect(unplanted.isEmpty, "reported outside the planted objects: \(unplanted)")
    }

    /// The allowlist says what is called, no more: an entry that nothing uses fails, and so does one without a reason.
    @Test func theAllowlistHasNoStaleOrUnexplainedEntries() throws {
        let dir = scratchDirectory("syscall-check-allowlist")
        let real = try String(contentsOfFile: repositoryRoot + "/Scripts/syscall-allowlist.txt", encoding: .utf8)
        let stale = dir + "/stale.txt", unexplained = dir + "/unexplained.txt"
        try (real + "\nallow RTP fsync # planted: RTP does not call fsync\n").write(toFile: stale, atomically: true, encoding: .utf8)
        try (real + "\nallow RTP fsync\n").write(toFile: unexplained, atomically: true, encoding: .utf8)
        let build = Compiler.buildDirectory.path
        let r1 = try runTool(Self.script, ["--build-dir", build, "--allowlist", stale])
        #expect(r1.code == 1 && r1.out.contains("RTP no longer calls fsync"), "\(r1.out)\(r1.err)")
        let r2 = try runTool(Self.script, ["--build-dir", build, "--allowlist", unexplained])
        #expect(r2.code == 2 && r2.err.contains("needs its reason"), "\(r2.out)\(r2.err)")
    }

    /// A copy of the build folder's target folders (links), with RTP's a folder of its own holding links to its
    /// objects, the planted objects, and its output-file-map.json naming them all.
    private func plantedBuild() throws -> String {
        let fm = FileManager.default
        let scratch = scratchDirectory("syscall-check")
        let build = scratch + "/debug", sources = scratch + "/planted"
        try? fm.removeItem(atPath: build)
        try fm.createDirectory(atPath: build, withIntermediateDirectories: true)
        try fm.createDirectory(atPath: sources, withIntermediateDirectories: true)
        let real = Compiler.buildDirectory.path
        for entry in try fm.contentsOfDirectory(atPath: real) where entry.hasSuffix(".build") && entry != "RTP.build" {
            try fm.createSymbolicLink(atPath: build + "/" + entry, withDestinationPath: real + "/" + entry)
        }
        let rtp = build + "/RTP.build"
        try fm.createDirectory(atPath: rtp, withIntermediateDirectories: true)
        for entry in try fm.contentsOfDirectory(atPath: real + "/RTP.build") where entry.hasSuffix(".o") {
            try fm.createSymbolicLink(atPath: rtp + "/" + entry, withDestinationPath: real + "/RTP.build/" + entry)
        }
        let mapData = try Data(contentsOf: URL(fileURLWithPath: real + "/RTP.build/output-file-map.json"))
        var map = try #require(try JSONSerialization.jsonObject(with: mapData) as? [String: Any])

        // One swiftc run compiles every plant to <name>.o in `sources`, as module RTP.
        var files: [String] = []
        for plant in plants {
            let file = sources + "/" + plant.file + ".swift"
            try plant.source.write(toFile: file, atomically: true, encoding: .utf8)
            files.append(file)
        }
        let args = ["-c", "-parse-as-library", "-module-name", "RTP", "-Onone", "-swift-version", "6"] + Compiler.searchFlags + files
        let r = try runTool(Compiler.swiftc, args, in: sources)
        try #require(r.code == 0, "swiftc: \(r.err)")
        for plant in plants {
            let object = rtp + "/" + plant.file + ".swift.o"
            try fm.moveItem(atPath: sources + "/" + plant.file + ".o", toPath: object)
            map[sources + "/" + plant.file + ".swift"] = ["object": object]
        }
        try JSONSerialization.data(withJSONObject: map).write(to: URL(fileURLWithPath: rtp + "/output-file-map.json"))
        return build
    }
}
