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
        let sent = Tally(), answered = Tally()
        let socket = daemon.socketPath
        let flooding = Thread {
            _ = onThreads(flood) { _ in
                let client = try LineClient(socketPath: socket, receiveTimeoutSeconds: 120)
                sent.append("sent")
                answered.append(try client.call("auth.login", ["login": "nobody@example.org", "password": "wrong guess 123"]).errorReason ?? "none")
            }
        }
        flooding.start()
        let deadline = Date().addingTimeInterval(30)
        while sent.count < flood && Date() < deadline { usleep(1000) }
        usleep(200_000)  // the flood reaches the daemon's queue
        // The other user: nobody, with its own connection.
        let script = """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth.login", "params": {
                "login": "+37251234567", "password": "a long enough passphrase", "device": {"key": "victim"}}}) + "\\n").encode())
            data = b""
            while not data.endswith(b"\\n"):
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            print(data.decode())
            """
        let victim = try DaemonHarness.run(["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                                            "/usr/bin/python3", "-c", script, daemon.socketPath])
        let pending = flood - answered.count
        #expect(victim.stdout.contains("\"session\""), "\(victim.stdout) \(victim.stderr)")
        // In arrival order the victim would wait for the whole flood; taking turns, it waits for
        // about one hash per worker.
        #expect(pending >= flood / 2, "\(pending) of \(flood) flood sign-ins were still waiting when the other user's ended")
        while answered.count < flood && Date() < deadline.addingTimeInterval(60) { usleep(10_000) }
    }
}
