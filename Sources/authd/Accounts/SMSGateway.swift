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

/// `spool`: development backend. Each message becomes a 0600 file under `<state>/sms-spool/`,
/// named so that the names sort by time and show the recipient
/// (`20261125T230512.123Z-+37251234567-Xy3kAb.sms`), and a line naming the number redacted and
/// the directory is logged. A person reads the newest code with `authctl admin sms last`
/// (``newest(in:to:)``) or in the file; the daemon's hourly maintenance deletes files older
/// than a day, as they hold codes in clear.
struct SpoolSMSGateway: SMSGateway {
    let directory: String
    let logger: Logger
    var now: @Sendable () -> Date = { Date() }

    func send(_ text: String, to number: PhoneNumber) async throws {
        do {
            try Syscalls.ensureDirectory(directory, mode: 0o700, exactMode: true)
        } catch {
            throw SMSDeliveryFailure(description: "spool directory \(directory): \(error)")
        }
        let name = Self.fileName(at: now(), to: number.e164, unique: Base64URL.encode(try OpenSSL.randomBytes(6)))
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
        // The directory, not the file: the file's name holds the whole number, which logs never do.
        logger.notice("SMS to \(number.redacted) spooled in \(directory)", [("AUTHD_SMS_SPOOL", directory)])
    }

    /// `TIME-NUMBER-UNIQUE.sms`: the UTC time to the millisecond in a fixed-width form that sorts
    /// as text (`20261125T230512.123Z`), the E.164 number, and random characters that keep two
    /// messages of the same millisecond apart.
    static func fileName(at date: Date, to e164: String, unique: String) -> String {
        let time = Timestamp.rfc3339(date, milliseconds: true).filter { $0 != "-" && $0 != ":" }
        return "\(time)-\(e164)-\(unique).sms"
    }

    /// One message as the spool holds it.
    struct Message: Equatable {
        let path: String
        /// The recipient, E.164.
        let to: String
        let text: String
        let modifiedSeconds: Int64
    }

    /// The newest message in `directory` (to `number`, when given), by file name, which sorts by
    /// time; nil when there is none. Files that are not the spool's own (not `.sms`, not a
    /// regular file, over 64 KiB, no `To:` line) are skipped.
    static func newest(in directory: String, to number: String?) -> Message? {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".sms") }
        for name in names.sorted(by: >) {
            let path = directory + "/" + name
            guard let status = Syscalls.fileStatus(atPath: path, followingLinks: false), status.kind == .regular,
                  let bytes = try? Syscalls.readFile(path, limit: 64 * 1024),
                  let content = String(validating: bytes, as: UTF8.self), content.hasPrefix("To: "),
                  let header = content.firstRange(of: "\n\n")
            else { continue }
            let to = String(content[content.index(content.startIndex, offsetBy: 4)..<header.lowerBound])
            if let number, to != number { continue }
            var text = String(content[header.upperBound...])
            if text.hasSuffix("\n") { text.removeLast() }
            return Message(path: path, to: to, text: text, modifiedSeconds: status.modifiedSeconds)
        }
        return nil
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
