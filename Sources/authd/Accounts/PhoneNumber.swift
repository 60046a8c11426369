import CPhoneNumberAPI
import Protocol
import Synchronization

/// A phone number validated and normalized by libphonenumber (the only file that calls it).
struct PhoneNumber: Sendable, Hashable, CustomStringConvertible {
    /// E.164, e.g. `+37251234567`.
    let e164: String
    /// ISO 3166-1 alpha-2 region of the number, e.g. `EE`.
    let region: String
    let kind: Kind

    enum Kind: Sendable { case mobile, mobileOrFixedLine, fixedLine, other }

    var description: String { e164 }

    /// The number with all but the last two digits hidden, for logs and messages.
    var redacted: String { Self.redact(e164) }

    /// An E.164 number with all but the country prefix and last two digits hidden.
    static func redact(_ e164: String) -> String {
        String(e164.prefix(4)) + String(repeating: "•", count: max(0, e164.count - 6)) + String(e164.suffix(2))
    }

    /// Parses `input` in international form, or in national form when `region` names the
    /// country (ISO 3166-1 alpha-2). Only numbers that can receive SMS are accepted.
    static func parse(_ input: String, region: String?) throws -> PhoneNumber {
        guard (1...64).contains(input.utf8.count), !input.utf8.contains(0) else {
            throw invalid("The phone number must be 1–64 characters.")
        }
        if let region {
            guard region.count == 2, region.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                throw InvalidParameter("Parameter 'region' must be a two-letter country code such as EE or DE.", field: "region")
            }
        }
        var e164 = [CChar](repeating: 0, count: 32)
        var regionCode = [CChar](repeating: 0, count: 8)
        var type = AUTHD_PHONE_TYPE_OTHER
        let normalize = try Library.normalize()
        let status = normalize(input, region?.uppercased(), &e164, e164.count, &regionCode, regionCode.count, &type)
        switch status {
        case AUTHD_PHONE_OK: break
        case AUTHD_PHONE_INVALID_COUNTRY_CODE:
            throw invalid(region == nil
                ? "The phone number has no country code: write it with one (+372…) or name the country, e.g. --region EE."
                : "The phone number's country code is not valid.")
        case AUTHD_PHONE_TOO_SHORT: throw invalid("The phone number is too short.")
        case AUTHD_PHONE_TOO_LONG: throw invalid("The phone number is too long.")
        case AUTHD_PHONE_NOT_A_NUMBER: throw invalid("That is not a phone number.")
        default: throw invalid("That phone number does not exist in its country's numbering plan.")
        }
        let kind: Kind = switch type {
        case AUTHD_PHONE_TYPE_MOBILE: .mobile
        case AUTHD_PHONE_TYPE_FIXED_LINE_OR_MOBILE: .mobileOrFixedLine
        case AUTHD_PHONE_TYPE_FIXED_LINE: .fixedLine
        default: .other
        }
        let number = PhoneNumber(e164: Self.string(e164), region: Self.string(regionCode), kind: kind)
        guard kind == .mobile || kind == .mobileOrFixedLine else {
            throw AccountFailure.phoneNotMobile(redacted: number.redacted)
        }
        return number
    }

    /// libphonenumber could not be opened: a fault of the installation, never of the input.
    /// The daemon's log has the dynamic linker's words; the caller is told of an internal error.
    struct LibraryUnavailable: Error, CustomStringConvertible {
        let description: String
    }

    /// `input` as a phone number, or nil when it is none (a login or a selector that may be
    /// something else); only libphonenumber's absence is an error.
    static func parseIfNumber(_ input: String, region: String?) throws(LibraryUnavailable) -> PhoneNumber? {
        do {
            return try parse(input, region: region)
        } catch let error as LibraryUnavailable {
            throw error
        } catch {
            return nil
        }
    }

    /// libphonenumber behind its C shim, `libauthd-phonenumber.so`, opened at the first phone
    /// number: it maps protobuf, ICU and abseil besides, about 4 MB that a daemon which never
    /// reads a phone number does without. Start-up says if the file is missing (`locate`).
    enum Library {
        /// Where the shim may be: in `lib/authd` beside the directory of authd's executable (an
        /// installed authd: `/usr/bin/authd`, `/usr/lib/authd/`), or in that directory itself (a
        /// build directory, where the tests and the bench run it too).
        static var candidates: [String] {
            guard let executable = Syscalls.executablePath(pid: Syscalls.processID()),
                  let slash = executable.lastIndex(of: "/") else { return [] }
            let directory = String(executable[..<slash])
            return [directory + "/../lib/authd/" + AUTHD_PHONE_LIBRARY, directory + "/" + AUTHD_PHONE_LIBRARY]
        }

        /// The first of `candidates` that exists.
        static func locate() throws(LibraryUnavailable) -> String {
            let paths = candidates
            guard let found = paths.first(where: Syscalls.fileExists) else {
                throw LibraryUnavailable(description: "\(AUTHD_PHONE_LIBRARY), which reads phone numbers, is in none of \(paths.joined(separator: ", ")): reinstall authd")
            }
            return found
        }

        /// The shim's one function once opened. A failure is not kept: the next phone number
        /// tries again (a descriptor limit reached once is no reason to refuse them all).
        private static let opened = Mutex<authd_phone_normalize_fn?>(nil)

        static func normalize() throws(LibraryUnavailable) -> authd_phone_normalize_fn {
            try opened.withLock { opened throws(LibraryUnavailable) in
                if let opened { return opened }
                switch Syscalls.loadSymbol(AUTHD_PHONE_NORMALIZE_SYMBOL, fromLibraryAt: try locate()) {
                case .success(let address):
                    let function = unsafeBitCast(address, to: authd_phone_normalize_fn.self)
                    opened = function
                    return function
                case .failure(let error):
                    throw LibraryUnavailable(description: error.description)
                }
            }
        }
    }

    private static func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func invalid(_ message: String) -> AccountFailure {
        .phoneInvalid(message)
    }
}
