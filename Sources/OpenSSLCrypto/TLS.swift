internal import COpenSSL
internal import CSSL
import FoundationEssentials

// The only file that calls libssl. TLS 1.3 only, on non-blocking sockets the caller owns and
// polls: every operation returns at once, saying whether it needs the socket readable or
// writable before it can go on. No OpenSSL handle crosses the module's API.

/// Why a TLS connection could not be set up or went on no further.
public enum TLSFailure: Error, Equatable, CustomStringConvertible {
    /// The peer's certificate is not the one expected: not issued by the trusted CA, not for
    /// the host, or not the pinned key. `detail` says which, in OpenSSL's words.
    case untrusted(String)
    /// The handshake or a record failed (wrong protocol, garbage, a TLS alert).
    case failed(String)

    public var description: String {
        switch self {
        case .untrusted(let detail): "the peer's certificate is not trusted: \(detail)"
        case .failed(let detail): "TLS failed: \(detail)"
        }
    }
}

/// Whom a client trusts as its server.
public enum TLSTrust: Sendable, Equatable {
    /// Certificates that chain to a CA in this PEM file and name the host connected to.
    case certificateAuthority(file: String)
    /// Exactly the server key whose SubjectPublicKeyInfo has this SHA-256, whatever signed it.
    case pinnedKey(sha256: [UInt8])
}

/// What a non-blocking TLS operation did.
public enum TLSProgress: Equatable {
    /// Done (a handshake), or this many bytes moved (a read or write).
    case done(Int)
    /// Call again once the socket is readable.
    case wantRead
    /// Call again once the socket is writable.
    case wantWrite
    /// The peer ended the connection (close_notify, or the socket closed).
    case closed
}

/// A TLS configuration (`SSL_CTX`): the certificate and key this side presents and whom it
/// trusts. Immutable once made, so one context serves every connection from any thread.
public final class TLSContext: @unchecked Sendable {
    fileprivate let handle: OpaquePointer
    fileprivate let trust: TLSTrust?

    private init(server: Bool, trust: TLSTrust?) throws {
        guard let context = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()) else { throw CryptoError.drain("SSL_CTX_new") }
        handle = context
        self.trust = trust
        guard authd_ssl_ctx_tls13_only(context) == 1 else { throw CryptoError.drain("TLS 1.3 only") }
        authd_ssl_ctx_set_write_modes(context)
        // Elliptic-curve key exchange only: the finite-field groups (ffdhe2048 and up), which
        // OpenSSL offers and accepts by default, are slower and weaker for their size.
        guard authd_ssl_ctx_set_groups(context, Self.groups) == 1 else { throw CryptoError.drain("the key exchange groups") }
        // Nothing resumes: every connection proves its key again, and no ticket keys to guard.
        _ = SSL_CTX_set_num_tickets(context, 0)
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_SESS_CACHE_MODE, Int(SSL_SESS_CACHE_OFF), nil)
    }

    /// The key exchange groups both sides offer and accept, in order of preference.
    public static let groups = "X25519:P-256:P-384"

    deinit { SSL_CTX_free(handle) }

    /// A server presenting the certificate chain and key in these PEM files, asking every client
    /// for a certificate. Any client certificate is accepted at the TLS layer: its key, proven by
    /// the handshake, is the client's identity (`TLSStream.peerKeySHA256`), and what that
    /// identity may do is decided above TLS.
    public static func server(certificateFile: String, keyFile: String) throws -> TLSContext {
        let context = try TLSContext(server: true, trust: nil)
        guard SSL_CTX_use_certificate_chain_file(context.handle, certificateFile) == 1 else {
            throw CryptoError.drain("reading the certificate \(certificateFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(context.handle, keyFile, SSL_FILETYPE_PEM) == 1 else {
            throw CryptoError.drain("reading the key \(keyFile)")
        }
        guard SSL_CTX_check_private_key(context.handle) == 1 else {
            ERR_clear_error()
            throw CryptoError(operation: "checking \(keyFile)", detail: "the key does not match the certificate \(certificateFile)")
        }
        SSL_CTX_set_verify(context.handle, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT) { _, _ in 1 }
        return context
    }

    /// A client presenting `certificate` (for `key`) and trusting servers by `trust`.
    public static func client(certificate: X509Certificate, key: P256PrivateKey, trust: TLSTrust) throws -> TLSContext {
        let context = try TLSContext(server: false, trust: trust)
        guard SSL_CTX_use_certificate(context.handle, certificate.handle) == 1,
              SSL_CTX_use_PrivateKey(context.handle, key.key) == 1,
              SSL_CTX_check_private_key(context.handle) == 1
        else { throw CryptoError.drain("the client certificate") }
        switch trust {
        case .certificateAuthority(let file):
            guard SSL_CTX_load_verify_locations(context.handle, file, nil) == 1 else {
                throw CryptoError.drain("reading the CA certificates \(file)")
            }
            SSL_CTX_set_verify(context.handle, SSL_VERIFY_PEER, nil)
        case .pinnedKey:
            // The chain does not matter; the key is compared once the handshake has proven it.
            SSL_CTX_set_verify(context.handle, SSL_VERIFY_PEER) { _, _ in 1 }
        }
        return context
    }
}

/// One TLS connection over a connected non-blocking socket the caller owns (and closes).
/// Not thread-safe: one owner calls it, as `Connection` does on its queue.
public final class TLSStream: @unchecked Sendable {
    private let ssl: OpaquePointer
    private let trust: TLSTrust?
    private var established = false

    /// `host`: for a client, the server's name or IP address, checked against its certificate
    /// when trusting a CA; nil on the server side.
    public init(context: TLSContext, fd: Int32, host: String?) throws {
        guard let ssl = SSL_new(context.handle) else { throw CryptoError.drain("SSL_new") }
        self.ssl = ssl
        trust = context.trust
        guard SSL_set_fd(ssl, fd) == 1 else { throw CryptoError.drain("SSL_set_fd") }
        if let host {
            SSL_set_connect_state(ssl)
            if case .certificateAuthority = context.trust {
                let parameters = SSL_get0_param(ssl)
                let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
                let set = isAddress ? X509_VERIFY_PARAM_set1_ip_asc(parameters, host) : X509_VERIFY_PARAM_set1_host(parameters, host, 0)
                guard set == 1 else { throw CryptoError.drain("the host name \(host)") }
            }
            if !host.contains(":") && !host.allSatisfy({ $0.isNumber || $0 == "." }) { _ = authd_ssl_set_server_name(ssl, host) }
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    /// Advances the handshake. `.done(0)` once it is complete and the peer is who `trust` says.
    public func handshake() throws(TLSFailure) -> TLSProgress {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            if case .pinnedKey(let pin) = trust, peerKeySHA256.map({ OpenSSL.constantTimeEquals($0, pin) }) != true {
                throw .untrusted("the server's key is not the pinned one")
            }
            established = true
            return .done(0)
        }
        let progress = try progress(result, "handshake")
        if progress == .closed { throw .failed("the peer closed the connection during the handshake") }
        return progress
    }

    /// Decrypted bytes into `buffer`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSFailure) -> TLSProgress {
        guard buffer.count > 0 else { return .done(0) }
        ERR_clear_error()
        var count = 0
        let result = SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count)
        return result == 1 ? .done(count) : try progress(result, "read")
    }

    /// Encrypts and sends a prefix of `bytes`; `.done(n)` says how much was taken.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TLSFailure) -> TLSProgress {
        guard bytes.count > 0 else { return .done(0) }
        ERR_clear_error()
        var count = 0
        let result = SSL_write_ex(ssl, bytes.baseAddress, bytes.count, &count)
        return result == 1 ? .done(count) : try progress(result, "write")
    }

    /// Sends close_notify, once, without waiting for the peer's.
    public func shutdown() {
        guard established else { return }
        established = false
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// SHA-256 of the peer certificate's SubjectPublicKeyInfo: the peer's identity, proven by
    /// the handshake. Nil before it completes or without a peer certificate.
    public var peerKeySHA256: [UInt8]? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        return X509Certificate.publicKeyInfo(of: certificate).map { OpenSSL.sha256($0) }
    }

    /// Turns a failed call's `SSL_get_error` into what to wait for, or the failure.
    private func progress(_ result: Int32, _ operation: String) throws(TLSFailure) -> TLSProgress {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL where ERR_peek_error() == 0:
            // The socket ended (or failed) without close_notify.
            return .closed
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                ERR_clear_error()
                throw .untrusted(String(cString: X509_verify_cert_error_string(verify)))
            }
            throw .failed("\(operation): \(CryptoError.drain(operation).detail)")
        }
    }
}
