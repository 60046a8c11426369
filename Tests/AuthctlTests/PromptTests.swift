import Protocol
import Testing
@testable import authctl

/// A terminal that answers from a script and records what it was asked.
private final class ScriptedTerminal {
    var answers: [String]
    var asked: [String] = []
    init(_ answers: [String]) { self.answers = answers }

    func ask(_ question: String) throws(CLIError) -> String {
        asked.append(question)
        guard !answers.isEmpty else { throw CLIError(message: "nothing more to type", reason: "user.cancelled", exitCode: .cancelled) }
        return answers.removeFirst()
    }
}

@Suite("authctl prompts")
struct PromptTests {
    private func newAccountPIN(_ terminal: ScriptedTerminal) throws(CLIError) -> String {
        try Prompt.newSecretAtTerminal(question: Command.newAccountPIN, repeatQuestion: Command.repeatAccountPIN,
                                       differ: "the PINs differ", weakness: Command.accountPINWeakness, ask: terminal.ask)
    }

    @Test("a password asked by authd goes as typed, spaces at its ends included; a PIN or a code without stray spaces")
    func answersSent() {
        #expect(RequestPrompter.sent(" correct horse battery staple ", kind: .password) == " correct horse battery staple ")
        #expect(RequestPrompter.sent(" 1234 ", kind: .pin1) == "1234")
        #expect(RequestPrompter.sent("123456 ", kind: .code) == "123456")
    }

    @Test("a weak new PIN is refused before its repeat is asked, and asked again")
    func weakPINAskedAgain() throws {
        let terminal = ScriptedTerminal(["123456", "12345", "480317", "480317"])
        #expect(try newAccountPIN(terminal) == "480317")
        #expect(terminal.asked == [Command.newAccountPIN, Command.newAccountPIN, Command.newAccountPIN, Command.repeatAccountPIN])
    }

    @Test("two entries that differ ask for both again")
    func mismatchAsksBoth() throws {
        let terminal = ScriptedTerminal(["480317", "480318", "480317", "480317"])
        #expect(try newAccountPIN(terminal) == "480317")
        #expect(terminal.asked == [Command.newAccountPIN, Command.repeatAccountPIN, Command.newAccountPIN, Command.repeatAccountPIN])
    }

    @Test("after three tries the last error ends the command")
    func boundedTries() {
        let weak = ScriptedTerminal(["000000", "111111", "222222", "480317", "480317"])
        #expect(throws: CLIError.self) { try newAccountPIN(weak) }
        #expect(weak.asked.count == Prompt.attempts, "no fourth question")
        do throws(CLIError) {
            _ = try newAccountPIN(ScriptedTerminal(["480317", "1", "480317", "2", "480317", "3"]))
            Issue.record("accepted")
        } catch {
            #expect(error.message == "the PINs differ")
            #expect(error.exitCode == .usage)
        }
    }

    @Test("a refused card PIN is asked again only when typed at the terminal and the card has tries left")
    func cardPINAgain() {
        var wrong = CLIError(message: "Wrong PIN (2 tries left).", reason: "pin.wrong", exitCode: .authenticationFailed)
        wrong.retriesLeft = 2
        #expect(RequestPrompter.asksAgain(after: wrong, typedAtTerminal: true))
        #expect(!RequestPrompter.asksAgain(after: wrong, typedAtTerminal: false), "a descriptor or a saved PIN fails at once")
        wrong.retriesLeft = 0
        #expect(!RequestPrompter.asksAgain(after: wrong, typedAtTerminal: true))
        let short = CLIError(message: "PIN2 is 5–12 digits.", reason: "pin.invalid_length", exitCode: .failure)
        #expect(RequestPrompter.asksAgain(after: short, typedAtTerminal: true))
        let blocked = CLIError(message: "The PIN is blocked on the card.", reason: "pin.blocked", exitCode: .lockedOrBlocked)
        #expect(!RequestPrompter.asksAgain(after: blocked, typedAtTerminal: true))
    }

    @Test("no terminal: the error names the option that gives the answer")
    func noTerminalNamesOption() {
        #expect(Prompt.noTerminal(fdOption: "pin-fd").contains("--pin-fd N"))
        #expect(!Prompt.noTerminal(fdOption: "pin-fd").contains("*"))
    }

    @Test("every sign-in method whoami can print has a word", arguments: [
        (["pwd"], "password"), (["otp"], "SMS code"), (["pwd", "pin"], "password and account PIN"),
        (["pwd", "fpt"], "password and fingerprint"), (["fpt"], "fingerprint"), (["fed"], "identity provider"),
        (["pop", "mfa"], "passkey"), (["x-new"], "x-new"),
    ])
    func signInWords(_ amr: [String], expected: String) {
        #expect(SignInMethods.describe(amr) == expected)
    }
}
