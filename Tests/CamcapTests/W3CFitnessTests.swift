// Issue 49: an independent implementation of the W3C "SelectSettings" fitness distance (Scripts/w3c-fitness.py,
// written from the specification, reading the listings itself) run over the corpus: for every camera and constraint
// set, the mode `select --constraints` picks reaches the best fitness distance any mode of the camera reaches.
import Foundation
import Testing
import TestSupport

@Suite(.timeLimit(.minutes(2))) struct W3CFitnessTests {
    @Test func everyCorpusPickHasTheSpecsBestFitness() throws {
        let r = try runTool(
            "/usr/bin/python3", [repo + "/Scripts/w3c-fitness.py", "--camcap", camcap, "--corpus", repo + "/Fixtures/corpus"])
        let last = r.out.split(separator: "\n").last.map(String.init) ?? ""
        #expect(r.code == 0, "\(r.out.suffix(2000)) \(r.err.suffix(500))")
        // 57 cameras × 10 constraint sets, every one compared.
        let counts = last.split(separator: " ").compactMap { Int($0) }
        #expect(counts.count >= 2 && counts[0] == counts[1] && counts[1] >= 500, "\(last)")
        print("FIGURE \(last)")
    }
}
