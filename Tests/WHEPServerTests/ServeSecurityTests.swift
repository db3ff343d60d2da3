import Foundation
import Testing
import TestSupport
import WHEPServer

/// The serve defaults an app embedding the WHEP server gets from the library (camcap serve uses the same).
@Suite struct ServeSecurityTests {
    @Test func theTokenComesFromTheFirstSourceGivenAndIsChecked() throws {
        let good = String(repeating: "a1", count: 10)
        #expect(try ServeSecurity.token(noAuth: true, given: nil, file: nil, environment: ["CAMCAP_TOKEN": good]).token == nil)
        #expect(try ServeSecurity.token(noAuth: false, given: good, file: nil, environment: [:]) == (good, "--token"))
        let file = work + "/token.txt"
        try (good + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try ServeSecurity.token(noAuth: false, given: nil, file: file, environment: ["CAMCAP_TOKEN": "other-token-0123456"]) == (good, file))
        #expect(try ServeSecurity.token(noAuth: false, given: nil, file: nil, environment: ["CAMCAP_TOKEN": good]) == (good, "$CAMCAP_TOKEN"))
        let random = try ServeSecurity.token(noAuth: false, given: nil, file: nil, environment: [:])
        #expect(random.source == "random" && ServeSecurity.isValidToken(random.token ?? ""))
        #expect(random.token != (try ServeSecurity.token(noAuth: false, given: nil, file: nil, environment: [:]).token))
        for (given, env) in [("short", [String: String]()), (nil, ["CAMCAP_TOKEN": "has space in it 0123"])] {
            do {
                _ = try ServeSecurity.token(noAuth: false, given: given, file: nil, environment: env)
                Issue.record("accepted \(given ?? env.description)")
            } catch { #expect(error.code == .badToken && error.message.contains("16...256"), "\(error)") }
        }
    }

    /// ServerPolicy checks its token as the documentation says (16–256 b64token characters): a typed error
    /// naming the length, or the character rule.
    @Test func aPolicyRefusesATokenOutsideTheRule() throws {
        var rows: [String] = []
        for (token, says) in [
            ("abc", "3 characters long"), (String(repeating: "a", count: 15), "15 characters long"),
            (String(repeating: "a", count: 257), "257 characters long"), ("has space in it 0123", "a character outside"),
        ] {
            do {
                _ = try ServerPolicy(token: token, hostNames: ["127.0.0.1"])
                Issue.record("accepted \(token.prefix(20))")
            } catch {
                rows.append("\(token.utf8.count) characters: \(error.code.rawValue)")
                #expect(error.code == .badToken && error.message.contains(says) && error.message.contains("16...256"), "\(error)")
            }
        }
        #expect(try ServerPolicy(token: String(repeating: "a1", count: 8), hostNames: []).token?.count == 16)
        #expect(try ServerPolicy(token: nil).token == nil)
        print("FIGURE ServerPolicy tokens refused: " + rows.joined(separator: "; "))
    }

    /// Connections count per network as well as per address: an IPv4 /24, an IPv6 /64.
    @Test func addressesCountInTheirNetwork() {
        #expect(ServeSecurity.network(of: "127.0.0.11") == "127.0.0.0/24")
        #expect(ServeSecurity.network(of: "192.168.1.200") == ServeSecurity.network(of: "192.168.1.3"))
        #expect(ServeSecurity.network(of: "192.168.2.3") != ServeSecurity.network(of: "192.168.1.3"))
        #expect(ServeSecurity.network(of: "::ffff:10.1.2.3") == "10.1.2.0/24")
        #expect(ServeSecurity.network(of: "2001:db8:0:1::5") == "2001:db8:0:1::/64")
        #expect(ServeSecurity.network(of: "2001:db8:0:1:ffff::9") == ServeSecurity.network(of: "2001:db8:0:1::5"))
        #expect(ServeSecurity.network(of: "2001:db8:0:2::5") != ServeSecurity.network(of: "2001:db8:0:1::5"))
        #expect(ServeSecurity.network(of: "?") == "?")
    }

    @Test func aServerAnswersToItsOwnNamesOnly() {
        let loopback = ServeSecurity.hostNames(
            listening: "127.0.0.1", isWildcard: false, candidates: ["127.0.0.1"], interfaces: [], extra: ["Cam.Example"])
        #expect(loopback == ["127.0.0.1", "localhost", "cam.example"])
        let wildcard = ServeSecurity.hostNames(
            listening: "0.0.0.0", isWildcard: true, candidates: ["10.0.0.5"], interfaces: ["10.0.0.5", "192.168.1.2"], extra: [])
        #expect(wildcard == ["10.0.0.5", "192.168.1.2", "127.0.0.1", "::1", "localhost"])
        let lan = ServeSecurity.hostNames(listening: "192.168.1.2", isWildcard: false, candidates: ["192.168.1.2"], interfaces: [], extra: [])
        #expect(lan == ["192.168.1.2"]) // not localhost: a LAN listener is not reached through loopback
    }
}
