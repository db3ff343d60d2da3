// The FixtureFiles target (Package.swift): where the fixture data is, for the tests (through TestSupport's
// fixturesRoot). This folder is a target's folder also so that SwiftPM watches it: adding or removing a file
// anywhere under Fixtures/ re-plans the build, so the EmbedFixtures plugin runs again with the new list of
// Fixtures/cameras (a changed file reruns it anyway: each is an input of its command).

/// The package's Fixtures folder (Fixtures/README.md), from this file's path: found from any working directory.
public let fixturesDirectory: String = {
    let path = #filePath
    guard let slash = path.lastIndex(of: "/") else { return "Fixtures" }
    return String(path[..<slash])
}()
