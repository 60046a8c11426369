import Foundation
import Glibc
import OpenSSLCrypto
import Testing

/// A CA and a server certificate for 127.0.0.1 made with the `openssl` CLI in a temporary
/// directory, as an administrator would make them.
final class TestPKI {
    let directory: String
    var caFile: String { directory + "/ca.pem" }
    var certificateFile: String { directory + "/server.pem" }
    var keyFile: String { directory + "/server.key" }

    init() throws {
        var template = Array("/tmp/authd-tls-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw TLSTestError("mkdtemp") }
        directory = String(cString: made)
        try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                          "-subj", "/CN=Test CA", "-keyout", directory + "/ca.key", "-out", caFile], in: directory)
        try Self.openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=hub",
                          "-keyout", keyFile, "-out", directory + "/server.csr"], in: directory)
        try "subjectAltName=IP:127.0.0.1,DNS:hub.test\n".write(toFile: directory + "/ext.cnf", atomically: true, encoding: .utf8)
        try Self.openssl(["x509", "-req", "-in", directory + "/server.csr", "-CA", caFile, "-CAkey", directory + "/ca.key",
                          "-CAcreateserial", "-days", "2", "-extfile", directory + "/ext.cnf", "-out", certificateFile], in: directory)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    static func openssl(_ arguments: [String], in directory: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw TLSTestError("openssl \(arguments.first ?? "") failed") }
    }

    /// SHA-256 of the server key's SubjectPublicKeyInfo, as `openssl` computes it.
    func serverKeyPin() throws -> [UInt8] {
        let der = directory + "/server.spki"
        try Self.openssl(["pkey", "-in", keyFile, "-pubout", "-outform", "DER", "-out", der], in: directory)
        return OpenSSL.sha256(Array(try Data(contentsOf: URL(fileURLWithPath: der))))
    }
}

struct TLSTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A connected pair of non-blocking stream sockets.
private func socketPair() -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds) == 0)
    return (fds[0], fds[1])
}

/// Drives both handshakes on one thread until both are done (or one throws), at most 200 rounds.
private func handshake(_ client: TLSStream, _ server: TLSStream) throws -> (client: Result<Void, TLSFailure>, server: Result<Void, TLSFailure>) {
    var clientDone: Result<Void, TLSFailure>?, serverDone: Result<Void, TLSFailure>?
    for _ in 0..<200 where clientDone == nil || serverDone == nil {
        if clientDone == nil {
            do { if case .done = try client.handshake() { clientDone = .success(()) } } catch { clientDone = .failure(error) }
        }
        if serverDone == nil {
            do { if case .done = try server.handshake() { serverDone = .success(()) } } catch { serverDone = .failure(error) }
        }
        // A side that failed sent an alert: let the other read it and fail too.
        if clientDone.map({ if case .failure = $0 { true } else { false } }) == true && serverDone == nil {
            do { _ = try server.handshake() } catch { serverDone = .failure(error) }
            serverDone = serverDone ?? .failure(.failed("the client gave up"))
        }
        if serverDone.map({ if case .failure = $0 { true } else { false } }) == true && clientDone == nil {
            do { _ = try client.handshake() } catch { clientDone = .failure(error) }
            clientDone = clientDone ?? .failure(.failed("the server gave up"))
        }
    }
    guard let clientDone, let serverDone else { throw TLSTestError("the handshake did not finish") }
    return (clientDone, serverDone)
}

@Suite("TLS: the libssl wrapper")
struct TLSTests {
    let pki: TestPKI
    let deviceKey: P256PrivateKey
    let deviceCertificate: X509Certificate

    init() throws {
        pki = try TestPKI()
        deviceKey = try P256PrivateKey.generate()
        deviceCertificate = try X509Certificate.selfSigned(commonName: "device", key: deviceKey, serial: 1, days: 365)
    }

    private func connect(trust: TLSTrust, host: String = "127.0.0.1")
        throws -> (client: TLSStream, server: TLSStream, outcome: (client: Result<Void, TLSFailure>, server: Result<Void, TLSFailure>), fds: (Int32, Int32)) {
        let (a, b) = socketPair()
        let server = try TLSStream(context: try TLSContext.server(certificateFile: pki.certificateFile, keyFile: pki.keyFile), fd: a, host: nil)
        let client = try TLSStream(context: try TLSContext.client(certificate: deviceCertificate, key: deviceKey, trust: trust), fd: b, host: host)
        return (client, server, try handshake(client, server), (a, b))
    }

    @Test("a client trusting the CA reaches the server; the server knows the client by its key; bytes go both ways")
    func roundTrip() throws {
        let (client, server, outcome, fds) = try connect(trust: .certificateAuthority(file: pki.caFile))
        defer { close(fds.0); close(fds.1) }
        #expect(throws: Never.self) { try outcome.client.get(); try outcome.server.get() }
        #expect(server.peerKeySHA256 == OpenSSL.sha256(try deviceCertificate.publicKeyInfo))
        #expect(client.peerKeySHA256 == (try pki.serverKeyPin()))
        let message = Array("hello over TLS\n".utf8)
        #expect(try message.withUnsafeBytes { try client.write($0) } == .done(message.count))
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try buffer.withUnsafeMutableBytes { try server.read(into: $0) } == .done(message.count))
        #expect(Array(buffer.prefix(message.count)) == message)
        #expect(try buffer.withUnsafeMutableBytes { try server.read(into: $0) } == .wantRead, "nothing more yet")
        client.shutdown()
        #expect(try buffer.withUnsafeMutableBytes { try server.read(into: $0) } == .closed)
    }

    @Test("a server whose certificate is for another host, or from another CA, is untrusted")
    func untrusted() throws {
        let wrongHost = try connect(trust: .certificateAuthority(file: pki.caFile), host: "other.test")
        defer { close(wrongHost.fds.0); close(wrongHost.fds.1) }
        guard case .failure(.untrusted) = wrongHost.outcome.client else { Issue.record("\(wrongHost.outcome.client)"); return }
        let other = try TestPKI()
        let otherCA = try connect(trust: .certificateAuthority(file: other.caFile))
        defer { close(otherCA.fds.0); close(otherCA.fds.1) }
        guard case .failure(.untrusted) = otherCA.outcome.client else { Issue.record("\(otherCA.outcome.client)"); return }
    }

    @Test("a pinned key: the right one connects whatever signed it; any other is untrusted")
    func pinned() throws {
        let right = try connect(trust: .pinnedKey(sha256: try pki.serverKeyPin()), host: "anything")
        defer { close(right.fds.0); close(right.fds.1) }
        #expect(throws: Never.self) { try right.outcome.client.get() }
        let wrong = try connect(trust: .pinnedKey(sha256: OpenSSL.sha256(Array("another key".utf8))))
        defer { close(wrong.fds.0); close(wrong.fds.1) }
        guard case .failure(.untrusted) = wrong.outcome.client else { Issue.record("\(wrong.outcome.client)"); return }
    }

    @Test("a key that does not match the certificate is refused when the server is configured")
    func mismatchedKey() throws {
        let other = try TestPKI()
        #expect(throws: CryptoError.self) { try TLSContext.server(certificateFile: pki.certificateFile, keyFile: other.keyFile) }
        #expect(throws: CryptoError.self) { try TLSContext.server(certificateFile: pki.directory + "/missing.pem", keyFile: pki.keyFile) }
    }

    @Test("garbage instead of a ClientHello fails the server's handshake, and does not hang it")
    func garbage() throws {
        let (a, b) = socketPair()
        defer { close(a); close(b) }
        let server = try TLSStream(context: try TLSContext.server(certificateFile: pki.certificateFile, keyFile: pki.keyFile), fd: a, host: nil)
        #expect(try server.handshake() == .wantRead)
        _ = "GET / HTTP/1.1\r\nHost: hub\r\n\r\n".withCString { write(b, $0, strlen($0)) }
        #expect(throws: TLSFailure.self) { _ = try server.handshake() }
    }
}
