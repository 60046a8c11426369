import Foundation
import Testing

/// The hub's TLS port as an independent client sees it: the real `openssl s_client` against a
/// hub the test starts.
@Suite("The hub's TLS parameters")
struct HubTLSTests {
    /// A client that offers only `group`: the handshake's outcome as `s_client -brief` reports it
    /// (bounded by `timeout`, so a hub that never answers fails the test instead of hanging it).
    static func handshake(_ rig: HubRig, group: String) throws -> (established: Bool, report: String) {
        let key = rig.directory + "/client.key", certificate = rig.directory + "/client.pem"
        if !FileManager.default.fileExists(atPath: certificate) {
            try HubRig.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=groups",
                                "-keyout", key, "-out", certificate])
        }
        let result = try DaemonHarness.run([
            "/usr/bin/timeout", "15", "/usr/bin/openssl", "s_client", "-brief", "-tls1_3", "-groups", group, "-connect", "127.0.0.1:\(rig.port)",
            "-cert", certificate, "-key", key, "-CAfile", rig.caFile, "-verify_return_error",
        ])
        #expect(result.status != 124, "s_client timed out offering \(group)")
        let report = result.stdout + result.stderr
        return (result.status == 0 && report.contains("CONNECTION ESTABLISHED"), report)
    }

    @Test("TLS 1.3 key exchange: X25519, P-256 and P-384 are accepted; the finite-field groups are refused",
          arguments: [("X25519", "X25519"), ("P-256", "256 bits"), ("P-384", "384 bits"), ("ffdhe2048", nil), ("ffdhe3072", nil), ("ffdhe4096", nil)])
    func keyExchangeGroups(group: String, reported: String?) throws {
        let rig = try HubRig()
        let (established, report) = try Self.handshake(rig, group: group)
        if let reported {
            #expect(established, "offering \(group): \(report)")
            let line = report.split(separator: "\n").first { $0.hasPrefix("Server Temp Key:") }.map(String.init) ?? ""
            #expect(line.contains(reported), "offering \(group): \(report)")
        } else {
            #expect(!established, "offering only \(group) must fail: \(report)")
        }
        // The refusal is the handshake's alone: the port still serves a client with a good group.
        #expect(try Self.handshake(rig, group: "X25519").established)
    }
}
