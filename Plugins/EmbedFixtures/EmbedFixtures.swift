import Foundation
import PackagePlugin

/// Compiles the built-in fixture cameras into the target that uses this plugin (FixtureCameras): at build time,
/// `embed-fixtures` turns every *.json and *.txt file in the target's `cameras/` folder into `BuiltinCameras.swift`
/// in the plugin's work directory, so an installed binary needs no resource bundle and no generated file is
/// checked in. The command reruns when a camera file changes, or when one is added or removed (the folder is an
/// input too, and the generator lists the folder itself).
@main struct EmbedFixtures: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) async throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        // The target's folder, from one of its top-level sources (Target.directoryURL needs tools version 6.1).
        guard
            let source = target.sourceFiles(withSuffix: ".swift").first(where: { $0.url.deletingLastPathComponent().lastPathComponent == target.name }
            )
        else {
            throw PluginError("\(target.name) has no Swift source at the top of its folder")
        }
        let cameras = source.url.deletingLastPathComponent().appending(path: "cameras")
        let files = try FileManager.default.contentsOfDirectory(at: cameras, includingPropertiesForKeys: nil)
            .filter { ["json", "txt"].contains($0.pathExtension) }
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
