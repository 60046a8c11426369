import Foundation
import Glibc
import OpenSSLCrypto
import Protocol
import SmartCard

/// authd-vcard: a virtual Estonian ID card for development and tests.
///
///     authd-vcard generate --out DIR [--name card] [--mode contact|contactless] [--pace p256|brainpool384]
///                          [--can 123456] [--pin1 1234] [--pin2 12345] [--retries 3] [--hostile MODE]
///     authd-vcard run PROFILE [--host 127.0.0.1] [--port 35963] [--remove-on-ins HEX] [--trace FILE]
///
/// `generate` writes DIR/ca.pem and DIR/ca.key (the test CA, reused when present) and
/// DIR/NAME.json (the card). `run` plugs the card into vpcd's reader until killed; when pcscd
/// goes away it waits for it to come back. `--trace` appends each APDU exchanged ("C <hex>",
/// "R <hex>") and each power cycle ("P") to FILE: `make bench` replays a login from it.

let usage = """
usage: authd-vcard generate --out DIR [--name NAME] [--mode contact|contactless] [--pace p256|brainpool384]
                            [--can CAN] [--pin1 PIN] [--pin2 PIN] [--retries N] [--hostile MODE]
       authd-vcard run PROFILE [--host HOST] [--port PORT] [--remove-on-ins HEX] [--trace FILE]
"""

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("authd-vcard: \(message)\n".utf8))
    exit(2)
}

func options(_ arguments: ArraySlice<String>) -> (positional: [String], named: [String: String]) {
    var positional: [String] = []
    var named: [String: String] = [:]
    var iterator = arguments.makeIterator()
    while let argument = iterator.next() {
        if argument.hasPrefix("--") {
            guard let value = iterator.next() else { fail("\(argument) needs a value") }
            named[String(argument.dropFirst(2))] = value
        } else {
            positional.append(argument)
        }
    }
    return (positional, named)
}

/// EF.CardAccess: one PACEInfo (ECDH generic mapping) for the chosen domain parameters.
func cardAccess(_ choice: String) -> String {
    switch choice {
    // id-PACE-ECDH-GM-AES-CBC-CMAC-128, version 2, NIST P-256 (parameter id 12): IDEMIA.
    case "p256": "31143012060A04007F0007020204020202010202010C"
    // id-PACE-ECDH-GM-AES-CBC-CMAC-256, version 2, brainpoolP384r1 (parameter id 16): Thales.
    case "brainpool384": "31143012060A04007F00070202040204020102020110"
    default: fail("--pace is p256 or brainpool384")
    }
}

func generate(_ named: [String: String]) throws {
    guard let directory = named["out"] else { fail("generate needs --out DIR") }
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let caKeyPath = directory + "/ca.key", caPath = directory + "/ca.pem"
    let caKey: P384PrivateKey
    let caCertificate: X509Certificate
    if FileManager.default.fileExists(atPath: caKeyPath), let pem = try? String(contentsOfFile: caPath, encoding: .utf8) {
        caKey = try P384PrivateKey(pem: String(contentsOfFile: caKeyPath, encoding: .utf8))
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Base64.decode(body) else { fail("\(caPath) does not decode") }
        caCertificate = try X509Certificate(der: der)
    } else {
        caKey = try P384PrivateKey.generate()
        caCertificate = try X509Certificate.issue(
            subject: [(.country, "EE"), (.organization, "authd test"), (.commonName, "authd TEST of ESTEID2018")],
            subjectKey: caKey, issuer: nil, serial: 1, days: 3650,
            extensions: [.certificateAuthority, .keyUsage([.keyCertSign, .cRLSign]), .subjectKeyIdentifier])
        try caKey.pemRepresentation().write(toFile: caKeyPath, atomically: true, encoding: .utf8)
        chmod(caKeyPath, 0o600)
        try Certificates.pem(caCertificate.der).write(toFile: caPath, atomically: true, encoding: .utf8)
    }

    let expiry = Calendar(identifier: .gregorian).date(byAdding: .year, value: 5, to: Date())!
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "dd MM yyyy"
    let person = CardProfile.Person(
        surname: named["surname"] ?? "JÕEORG", givenNames: named["given-names"] ?? "JAAK-KRISTJAN", sex: "M", citizenship: "EST",
        birth: "08 01 1980 EST", personalCode: named["personal-code"] ?? "38001085718", documentNumber: "AS0123456",
        expiry: formatter.string(from: expiry))
    // Shaped like the ID card's: C, CN "SURNAME,GIVEN,CODE", SN, GN, serialNumber "PNOEE-CODE".
    let subject: [(X509Certificate.Attribute, String)] = [
        (.country, "EE"), (.commonName, "\(person.surname),\(person.givenNames),\(person.personalCode)"),
        (.surname, person.surname), (.givenName, person.givenNames), (.serialNumber, "PNOEE-\(person.personalCode)"),
    ]
    let authKey = try P384PrivateKey.generate(), signKey = try P384PrivateKey.generate()
    let issuer = (certificate: caCertificate, key: caKey)
    let serial = Int(UInt32.random(in: 2...UInt32.max >> 1))
    let authCertificate = try X509Certificate.issue(
        subject: subject, subjectKey: authKey, issuer: issuer, serial: serial, days: 1825,
        extensions: [.keyUsage([.digitalSignature, .keyAgreement]), .clientAuthentication, .authorityKeyIdentifier])
    let signCertificate = try X509Certificate.issue(
        subject: subject, subjectKey: signKey, issuer: issuer, serial: serial + 1, days: 1825,
        extensions: [.keyUsage([.nonRepudiation]), .authorityKeyIdentifier])

    let retries = Int(named["retries"] ?? "3") ?? 3
    var hostile: CardProfile.Hostility?
    if let mode = named["hostile"] {
        guard let parsed = CardProfile.Hostility(rawValue: mode) else {
            fail("--hostile is one of \(CardProfile.Hostility.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        hostile = parsed
    }
    guard let mode = CardProfile.Mode(rawValue: named["mode"] ?? "contact") else { fail("--mode is contact or contactless") }
    let profile = try CardProfile(
        mode: mode, can: named["can"] ?? "123456", pin1: named["pin1"] ?? "1234", pin2: named["pin2"] ?? "12345",
        pin1Retries: retries, pin2Retries: retries, person: person,
        authKey: authKey.pemRepresentation(), authCertificate: Base64.encode(authCertificate.der),
        signKey: signKey.pemRepresentation(), signCertificate: Base64.encode(signCertificate.der),
        cardAccess: cardAccess(named["pace"] ?? "p256"), hostile: hostile)
    let path = directory + "/" + (named["name"] ?? "card") + ".json"
    try profile.write(path)
    print(path)
}

func run(_ path: String, _ named: [String: String]) throws {
    let card = try VirtualCard(profile: CardProfile.load(path))
    let link = VPCDLink(host: named["host"] ?? "127.0.0.1", port: UInt16(named["port"] ?? "35963") ?? 35963)
    var removeOn = named["remove-on-ins"].flatMap { UInt8($0, radix: 16) }
    let trace = named["trace"].map { path in
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { fail("cannot write the trace to \(path)") }
        return FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    }
    func record(_ line: String) { trace?.write(Data((line + "\n").utf8)) }
    signal(SIGPIPE, SIG_IGN)
    reconnecting: while true {
        let fd = link.connect()
        card.powerCycle()
        record("P")
        serving: while let payload = VPCDLink.receive(fd) {
            var answer: [UInt8]?
            if payload.count == 1 {
                switch payload[0] {
                case 0, 1, 2: card.powerCycle(); record("P")
                case 4: answer = card.atr
                default: break
                }
            } else {
                if let instruction = removeOn, payload.count >= 2, payload[1] == instruction {
                    // The card leaves the reader mid-command (once), then comes back: after
                    // long enough for pcscd's presence polling (every 400 ms) to see it gone.
                    removeOn = nil
                    close(fd)
                    usleep(1_200_000)
                    continue reconnecting
                }
                let response = card.respond(to: payload)
                record("C " + Hex.encode(payload))
                record("R " + Hex.encode(response))
                answer = response
            }
            if let answer, !VPCDLink.send(fd, answer) { break }
        }
        close(fd)
        usleep(300_000)
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else { fail(usage) }
do {
    switch arguments[1] {
    case "generate":
        try generate(options(arguments[2...]).named)
    case "run":
        let parsed = options(arguments[2...])
        guard parsed.positional.count == 1 else { fail(usage) }
        try run(parsed.positional[0], parsed.named)
    default:
        fail(usage)
    }
} catch {
    fail("\(error)")
}
