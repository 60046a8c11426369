import Foundation
import Glibc
import Protocol
import Testing

@Suite("Fair shares of the Argon2id workers")
struct ArgonFairnessTests {
    @Test("one user's 50 concurrent wrong sign-ins do not make another user's sign-in wait behind them")
    func flood() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness(config: "[accounts]\nlogins_per_minute = 10000\n")
        // System mode: other users may connect.
        try daemon.start(arguments: ["--system"])
        chmod(daemon.directory + "/run", 0o755)
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        // Makes the decoy hash an unknown account is checked against, before the flood.
        #expect(try client.call("auth.login", ["login": "nobody@example.org", "password": "x"]).errorReason == "auth.failed")
        let flood = 50
        // The other user: nobody, connected before the flood, sending its sign-in when told to.
        let script = """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX); s.settimeout(120); s.connect(sys.argv[1])
            print("ready", flush=True)
            sys.stdin.readline()
            s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth.login", "params": {
                "login": "+37251234567", "password": "a long enough passphrase", "device": {"key": "victim"}}}) + "\\n").encode())
            data = b""
            while not data.endswith(b"\\n"):
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            print(data.decode(), flush=True)
            """
        let victim = Process()
        victim.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        victim.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", script, daemon.socketPath]
        let input = Pipe(), output = Pipe()
        victim.standardInput = input
        victim.standardOutput = output
        try victim.run()
        defer { if victim.isRunning { victim.terminate() } }
        #expect(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("ready"))

        // Each flood connection sends its sign-in and then a `hello`: a connection's lines are
        // taken in order, so hello's answer (at once, long before the sign-in's) is the marker
        // that the daemon has taken the sign-in up, and it goes through the store, first come
        // first served, before the victim's.
        let queued = Tally(), answered = Tally()
        let socket = daemon.socketPath
        let flooding = Thread {
            _ = onThreads(flood) { _ in
                let client = try LineClient(socketPath: socket, receiveTimeoutSeconds: 120)
                try client.send(#"{"jsonrpc":"2.0","id":1,"method":"auth.login","params":{"login":"nobody@example.org","password":"wrong guess 123"}}"#
                                + "\n" + #"{"jsonrpc":"2.0","id":2,"method":"hello"}"# + "\n")
                while let line = try client.readJSON() {
                    if line["id"] == 2 { queued.append(line["result"] != nil ? "queued" : "hello failed") }
                    if line["id"] == 1 {
                        answered.append(line.errorReason ?? "none")
                        return
                    }
                }
            }
        }
        flooding.start()
        let deadline = Date().addingTimeInterval(30)
        while queued.count < flood && Date() < deadline { usleep(1000) }
        try #require(queued.count == flood, "every flood sign-in was taken up within 30 s, \(answered.count) of them answered")
        #expect(queued.all.allSatisfy { $0 == "queued" }, "\(queued.all)")
        let answeredBefore = answered.count
        try input.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
        let reply = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let overtaking = answered.count - answeredBefore
        #expect(reply.contains("\"session\""), "\(reply)")
        // In arrival order the other user's sign-in would wait for the rest of the flood (about
        // 40 sign-ins); taking turns, for about one hash per worker.
        #expect(overtaking <= 12, "\(overtaking) flood sign-ins ended while the other user's waited (\(answeredBefore) before it was sent)")
        while answered.count < flood && Date() < deadline.addingTimeInterval(60) { usleep(10_000) }
    }
}
