import Foundation
import Testing
@testable import FixtureCameras

/// The built-in cameras are generated at build time (the EmbedFixtures plugin) from Fixtures/cameras/.
@Test("every file in Fixtures/cameras/ is a built-in camera whose text is the file's, and every built-in parses")
func everyCameraFileIsABuiltinCamera() throws {
    let files = try FileManager.default.contentsOfDirectory(atPath: fixturesDir)
        .filter { $0.hasSuffix(".json") || $0.hasSuffix(".txt") }
        .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    #expect(files.count >= 7, "the shipped cameras: \(files)")
    #expect(BuiltinCameras.files.map(\.file) == files)
    for file in files {
        let builtin = try #require(BuiltinCameras.files.first { $0.file == file }, "\(file) is not a built-in camera")
        let disk = try #require(FileManager.default.contents(atPath: fixturesDir + "/" + file))
        #expect(Array(builtin.text.utf8) == Array(disk), "\(file) differs from its compiled-in text")
        #expect(builtin.name + "." + (file as NSString).pathExtension == file)
    }
    #expect(FixtureCameraProvider.parsedBuiltins.map(\.name) == BuiltinCameras.files.map(\.name), "a built-in camera does not parse")
    #expect(FixtureCameraProvider().builtinNames == BuiltinCameras.files.map(\.name))
}
