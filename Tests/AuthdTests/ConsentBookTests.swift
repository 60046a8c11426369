import Protocol
import Testing
@testable import authd

/// The remembered consents of `prompt: desktop` on a real SQLite store.
@Suite("Consent book")
struct ConsentBookTests {
    let directory = TemporaryDirectory()
    let clock = TestClock()
    let book: ConsentBook

    init() throws {
        book = ConsentBook(store: try Store(path: directory.path + "/authd.db"), now: clock.closure)
    }

    static let program = "flatpak:org.example.App"
    static let audience = "https://rp.example"

    @Test("a consent answers only its own purpose, for the same user, program and audience", arguments: ConsentPurpose.allCases)
    func onePurpose(_ granted: ConsentPurpose) async throws {
        try await book.grant(uid: 1000, program: Self.program, purpose: granted, audience: Self.audience)
        for purpose in ConsentPurpose.allCases {
            #expect(try await book.isGranted(uid: 1000, program: Self.program, purpose: purpose, audience: Self.audience) == (purpose == granted), "\(purpose)")
        }
        #expect(try await !book.isGranted(uid: 1001, program: Self.program, purpose: granted, audience: Self.audience))
        #expect(try await !book.isGranted(uid: 1000, program: "exe:/usr/bin/other", purpose: granted, audience: Self.audience))
        #expect(try await !book.isGranted(uid: 1000, program: Self.program, purpose: granted, audience: "https://other.example"))
    }

    @Test("list names each consent's purpose; revoke forgets by purpose, by audience, or all of a program's")
    func listAndRevoke() async throws {
        for (purpose, audience) in [(ConsentPurpose.cardSign, Self.audience), (.accountToken, Self.audience), (.accountToken, "https://shop.example")] {
            try await book.grant(uid: 1000, program: Self.program, purpose: purpose, audience: audience)
        }
        try await book.grant(uid: 1001, program: Self.program, purpose: .cardSign, audience: Self.audience)
        let at = Int64(TestClock.start.timeIntervalSince1970)
        #expect(try await book.list(uid: 1000) == [
            Consent(program: Self.program, purpose: .accountToken, audience: Self.audience, grantedAt: at),
            Consent(program: Self.program, purpose: .cardSign, audience: Self.audience, grantedAt: at),
            Consent(program: Self.program, purpose: .accountToken, audience: "https://shop.example", grantedAt: at),
        ])

        #expect(try await book.revoke(uid: 1000, program: Self.program, purpose: .cardLogin, audience: nil) == 0)
        #expect(try await book.revoke(uid: 1000, program: Self.program, purpose: .accountToken, audience: Self.audience) == 1)
        #expect(try await book.list(uid: 1000).map(\.purpose) == [.cardSign, .accountToken])
        #expect(try await book.revoke(uid: 1000, program: Self.program, purpose: nil, audience: Self.audience) == 1)
        #expect(try await book.list(uid: 1000).map(\.audience) == ["https://shop.example"])
        #expect(try await book.revoke(uid: 1000, program: Self.program, purpose: nil, audience: nil) == 1)
        #expect(try await book.list(uid: 1000).isEmpty)
        #expect(try await book.list(uid: 1001).count == 1, "another user's consent stays")
    }
}
