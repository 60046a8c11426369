@testable import authd
import Protocol
import Testing

/// What desktop dialogs say, with hostile text in every field that comes from outside.
@Suite("Desktop dialog wording")
struct DeskWordingTests {
    static let hostileProgram = ProgramIdentity(kind: .executable, name: "/usr/bin/" + String(repeating: "\u{3000}", count: 300) + "bank", executable: nil)

    @Test("padding, blank letters and stacked marks are escaped, and each field is cut in bytes: the fixed lines always fit Assuan's 1000-byte line")
    func hostileFieldsFit() {
        let description = "Contract.pdf" + String(repeating: "\u{2800}", count: 400) + "Hash: 0000" + String(repeating: "e\u{301}\u{301}\u{301}\u{301}\u{301}", count: 100)
        let purpose = DeskPurpose.sign(audience: String(repeating: "\u{3164}", count: 256), description: description, hash: String(repeating: "A", count: 86))
        let dialog = DeskWording.secret(.pin2, message: "Enter PIN2 to sign \"\(description)\"", by: Self.hostileProgram, for: purpose,
                                        retriesLeft: 2, error: nil, timeout: 60)
        let line = Assuan.line("SETDESC", dialog.description)
        #expect(line.utf8.count <= Assuan.lineLimit, "\(line.utf8.count) bytes")
        #expect(!line.hasSuffix("…"), "the line itself was cut: fixed lines lost")
        #expect(dialog.description.contains("\nHash: AAAA") && dialog.description.hasSuffix("2 tries left."))
        for invisible in ["\u{3000}", "\u{2800}", "\u{3164}"] { #expect(!dialog.description.contains(invisible)) }
        #expect(Pinentry.field("e\u{301}\u{301}\u{301}\u{301}\u{301}").contains("\\u{301}"), "marks past the third are shown")
    }

    @Test("a field of percent signs is cut by its escaped size: the document's hash, authd's question and the tries left still reach pinentry")
    func percentFieldsFit() {
        let percents = String(repeating: "%", count: 200)
        let purpose = DeskPurpose.sign(audience: percents, description: percents, hash: "abc")
        let dialog = DeskWording.secret(.pin2, message: "Enter PIN2 to sign \"\(percents)\"", by: Self.hostileProgram, for: purpose,
                                        retriesLeft: 3, error: nil, timeout: 60)
        let line = Assuan.line("SETDESC", dialog.description)
        #expect(!line.hasSuffix("…"), "the line itself was cut: fixed lines lost")
        let shown = String(decoding: Assuan.unescape(line.dropFirst("SETDESC ".count)), as: UTF8.self)
        #expect(shown.contains("\nHash: abc\n") && shown.contains("Enter PIN2 to sign") && shown.hasSuffix("3 tries left."), "\(shown)")
        #expect(Pinentry.field(percents).utf8.count <= 160 / 3 + "…".utf8.count)
    }

    @Test("each purpose a consent is kept for has a question of its own words, naming the audience")
    func consentQuestionPerPurpose() {
        let purposes: [DeskPurpose] = [.login(audience: "https://rp.example"), .sign(audience: "https://rp.example", description: "d", hash: nil),
                                       .certificate(audience: "https://rp.example", signing: true), .accountToken(audience: "https://rp.example")]
        #expect(Set(purposes.compactMap { $0.consent?.purpose }) == Set(ConsentPurpose.allCases))
        let questions = purposes.map { DeskWording.consent(by: Self.hostileProgram, for: $0, remembered: true, timeout: 60).description.split(separator: "\n")[0] }
        #expect(Set(questions).count == purposes.count, "\(questions)")
        #expect(questions.allSatisfy { $0.hasPrefix("Allow ") && $0.hasSuffix("?") && $0.contains("https://rp.example") }, "\(questions)")
        #expect(DeskPurpose.certificate(audience: nil, signing: false).consent == nil && DeskPurpose.read.consent == nil && DeskPurpose.unlock.consent == nil)
    }

    @Test("the consent question keeps its buttons' keys apart, and offers Allow once only where an answer is remembered")
    func consentButtons() {
        let remembered = DeskWording.consent(by: Self.hostileProgram, for: .login(audience: "https://rp.example"), remembered: true, timeout: 60)
        #expect(remembered.question == .confirm(ok: "_Always allow", notOK: "Allow _once", cancel: "_Deny"))
        let always = DeskWording.consent(by: Self.hostileProgram, for: .login(audience: "https://rp.example"), remembered: false, timeout: 60)
        #expect(always.question == .confirm(ok: "_Allow", notOK: nil, cancel: "_Deny"))
        #expect(Assuan.line("SETDESC", remembered.description).utf8.count <= Assuan.lineLimit)
    }
}
