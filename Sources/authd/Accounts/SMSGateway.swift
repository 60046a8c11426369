import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Where verification codes go (`[sms] backend`). A failed delivery is an error the flow
/// turns into `sms.undeliverable`; the code of a failed send is never valid.
protocol SMSGateway: Sendable {
    /// Delivers `text` to `number`, or throws `SMSDeliveryFailure`.
    func send(_ text: String, to number: PhoneNumber) async throws
}

/// Why a message was not delivered. Never contains the message text (it holds a code).
struct SMSDeliveryFailure: Error, CustomStringConvertible {
    let description: String
}

/// `spool`: development backend. Each message becomes a 0600 file under
/// `<state>/sms-spool/`, and a redacted line is logged, so a person can read the code without
/// a phone (`cat ~/.local/state/authd/sms-spool/*`).
struct SpoolSMSGateway: SMSGateway {
    let directory: String
    let logger: Logger

    func send(_ text: String, to number: PhoneNumber) async throws {
        do {
            try Syscalls.ensureDirectory(directory, mode: 0o700, exactMode: true)
        } catch {
            throw SMSDeliveryFailure(description: "spool directory \(directory): \(error)")
        }
        let name = "\(Int64(Date().timeIntervalSince1970 * 1000))-\(Base64URL.encode(try OpenSSL.randomBytes(6))).sms"
        let path = directory + "/" + name
        let fd: Int32
        do throws(SystemError) {
            fd = try Syscalls.createNewFile(path, mode: 0o600)
        } catch {
            throw SMSDeliveryFailure(description: "cannot create \(path): \(error.reason)")
        }
        defer { Syscalls.close(fd) }
        let content = Array("To: \(number.e164)\n\n\(text)\n".utf8)
        do {
            try content.withUnsafeBytes { try Syscalls.writeAll(fd, $0, name: path) }
        } catch {
            throw SMSDeliveryFailure(description: "cannot write \(path)")
        }
        logger.notice("SMS to \(number.redacted) spooled in \(path)", [("AUTHD_SMS_SPOOL", path)])
    }
}

/// `http`: POSTs `{"text","to"}` as JSON with a bearer token (`[sms] token_file`) to `[sms] url`,
/// through `authd-http` like every HTTP request of authd: no TLS stack or remote-response
/// parsing in the process that holds the keys. A 2xx answer means delivered.
struct HTTPSMSGateway: SMSGateway {
    let http: HTTPClient
    let url: String
    let tokenFile: String
    let timeoutSeconds: Int

    private struct Message: Encodable {
        let text: String
        let to: String
    }

    func send(_ text: String, to number: PhoneNumber) async throws {
        var headers = ["Content-Type": "application/json"]
        if !tokenFile.isEmpty {
            guard let token = HTTPClient.credential(fromFile: tokenFile) else {
                throw SMSDeliveryFailure(description: "cannot read a token from sms.token_file")
            }
            headers["Authorization"] = "Bearer " + token
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var body = Array(try encoder.encode(Message(text: text, to: number.e164)))
        defer { OpenSSL.wipe(&body) }
        let response: HTTPResponse
        do {
            response = try await http.send("POST", url, headers: headers, body: body, timeoutSeconds: timeoutSeconds, maxResponseBytes: 64 * 1024)
        } catch {
            throw SMSDeliveryFailure(description: "the SMS gateway: \(error)")
        }
        guard (200..<300).contains(response.status) else { throw SMSDeliveryFailure(description: "the SMS gateway answered HTTP \(response.status)") }
    }
}

/// `command`: runs a configured program with the number in `SMS_TO` and the text on stdin;
/// exit status 0 means delivered. Nothing of the text reaches the program's arguments (which
/// every local user can read in /proc) or authd's log.
struct CommandSMSGateway: SMSGateway {
    let program: String
    let timeoutSeconds: Int
    /// Extra environment for the program (the http backend's settings).
    var environment: [String: String] = [:]

    func send(_ text: String, to number: PhoneNumber) async throws {
        let status: Int32?
        do {
            status = try await Syscalls.spawnAndWait(
                program, arguments: [],
                environment: environment.merging(["SMS_TO": number.e164, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]) { _, fixed in fixed },
                input: Array((text + "\n").utf8), timeout: .seconds(timeoutSeconds))
        } catch {
            throw SMSDeliveryFailure(description: "cannot run \(program): \(error)")
        }
        guard let status else { throw SMSDeliveryFailure(description: "\(program) did not finish within \(timeoutSeconds) s") }
        guard status == 0 else { throw SMSDeliveryFailure(description: "\(program) exited with status \(status)") }
    }
}
