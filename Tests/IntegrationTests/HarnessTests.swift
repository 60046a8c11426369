import Foundation
import Testing

/// The rigs themselves: a child that goes away early fails the one test that talks to it.
@Suite("Test harness")
struct HarnessTests {
    @Test("a command that exits without reading its input: its status comes back, and no SIGPIPE ends the test process")
    func commandIgnoringInput() throws {
        // More than a pipe holds, so the write is still going on when `true` has exited.
        let result = try DaemonHarness.run(["/bin/true"], stdin: String(repeating: "x", count: 1 << 20))
        #expect(result.status == 0)
    }

    @Test("writing to a native host that has exited throws, and no SIGPIPE ends the test process")
    func hostGone() throws {
        let host = try NativeHost("/bin/true", environment: ["PATH=/usr/bin:/bin"], stderr: "/dev/null")
        #expect(try host.waitForExit() == 0)
        #expect(throws: HarnessError.self) { try host.sendRaw([0, 0, 0, 0]) }
    }
}
