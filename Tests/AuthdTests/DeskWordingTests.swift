import Testing
@testable import authd

/// What desktop dialogs say (pure): who asks, for which origin, and what is handed over.
@Suite("Desktop dialog wording")
struct DeskWordingTests {
    static let host = ProgramIdentity(kind: .executable, name: "/usr/bin/authd-webeid", executable: "/usr/bin/authd-webeid")
    static let holder = CardHolder(personalCode: "38001085718", name: "JAAK-KRISTJAN JÕEORG")

    @Test("a certificate hand-over names the origin, which certificate, whose; OK is \"Hand over\"")
    func handOver() {
        let dialog = DeskWording.handOver(Self.holder, by: Self.host, for: .certificate(audience: "https://rp.example", signing: true), timeout: 30)
        #expect(dialog.description.contains("asks for your ID card's signing certificate for https://rp.example."))
        #expect(dialog.description.contains("JAAK-KRISTJAN JÕEORG, personal code 38001085718"))
        #expect(dialog.question == .confirm(ok: "Hand over", notOK: nil, cancel: "Cancel"))
    }

    @Test("consent for a certificate is asked for the origin; a login's PIN1 question says what the site gets")
    func consentAndLogin() {
        let consent = DeskWording.consent(by: Self.host, for: .certificate(audience: "https://rp.example", signing: true), remembered: true, timeout: 30)
        #expect(consent.description.hasPrefix("Allow /usr/bin/authd-webeid to have your ID card's certificate for https://rp.example?"))
        #expect(DeskWording.handedOver(Self.holder) == "Your name and personal code go to the site: JAAK-KRISTJAN JÕEORG, 38001085718.")
        #expect(DeskPurpose.certificate(audience: nil, signing: false).audience == nil)
    }

    @Test("a signature's dialog shows the whole hash, escaped")
    func wholeHash() {
        let hash = String(repeating: "Ab9_-", count: 12) + "xyz"
        let text = DeskWording.request(by: Self.host, for: .sign(audience: "https://rp.example", description: "Loan", hash: hash))
        #expect(text.contains("Hash: \(hash)") && !text.contains("…"))
        let hostile = DeskWording.handedOver(CardHolder(personalCode: "1\n2", name: "A\u{1b}[2J"))
        #expect(!hostile.contains("\n") && !hostile.contains("\u{1b}"))
    }
}
