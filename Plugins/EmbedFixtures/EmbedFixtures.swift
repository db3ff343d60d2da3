import Foundation
import PackagePlugin

/// Compiles the built-in fixture cameras into the target that uses this plugin (FixtureCameras): at build time,
/// `embed-fixtures` turns every *.json and *.txt file in the package's `Fixtures/cameras/` folder (the one home of
/// the fixture data, shared with the tests and the fuzzers; see Fixtures/README.md) into `BuiltinCameras.swift` in
/// the plugin's work directory, so an installed binary needs no resource bundle and no generated file is checked
/// in. The command reruns when a camera file changes (each is an input), or when one is added or removed (the folder
/// is an input too, the generator lists the folder itself, and Fixtures/ is the folder of the FixtureFiles target,
/// which SwiftPM watches: a file added or removed there re-plans the build, so this list is made again).
@main struct EmbedFixtures: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        guard target is SourceModuleTarget else { return [] }
        // The package of the target (also when this package is a dependency, e.g. of Fuzz/).
        let cameras = context.package.directoryURL.appending(path: "Fixtures/cameras")
        let files: [URL]
        do {
            files = try FileManager.default.contentsOfDirectory(at: cameras, includingPropertiesForKeys: nil)
                .filter { ["json", "txt"].contains($0.pathExtension) }
        } catch {
            throw PluginError("\(target.name): cannot list the fixture cameras in \(cameras.path): \(error)")
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "BuiltinCameras.swift")
        return [
            .buildCommand(
                displayName: "Embedding the fixture cameras of \(target.name)",
                executable: try context.tool(named: "embed-fixtures").url,
                arguments: [cameras.path, output.path],
                inputFiles: [cameras] + files,
                outputFiles: [output])
        ]
    }
}

struct PluginError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
