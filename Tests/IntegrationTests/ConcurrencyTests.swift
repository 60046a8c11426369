import CLinux
import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

@Suite("Many clients")
struct ConcurrencyTests {
    init() {
        // This process opens over a thousand sockets.
        _ = authd_raise_nofile_limit()
    }

    @Test("1000 idle connections are held and a new client is still served")
    func thousandIdleConnections() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        var idle: [LineClient] = []
        for _ in 0..<1000 { idle.append(try daemon.connect()) }
        let status = try daemon.connect().result("admin.status")
        #expect(status["connections"]?.integerValue == 1001)
        // Every held connection was accepted, not just queued: each one answers.
        var answered = 0
        for client in idle where try client.result("hello")["protocol_version"] == 1 { answered += 1 }
        #expect(answered == 1000)
        idle.removeAll()
    }

    @Test("a client that sends half a line and stalls, or never writes, delays nobody")
    func stalledClients() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let silent = try daemon.connect()
        let partial = try daemon.connect()
        try partial.send(#"{"jsonrpc":"2.0","id":1,"method":"hel"#)
        let other = try daemon.connect()
        for _ in 0..<10 { #expect(try other.result("auth.local", ["aud": "x"])["token"] != nil) }
        // The stalled line completes later and is answered normally.
        try partial.send(#"lo"}"# + "\n")
        #expect(try partial.readJSON()?["result"]?["protocol_version"] == 1)
        _ = silent
    }

    @Test("[server] idle_timeout closes a connection with nothing to do, not one with a subscription")
    func idleTimeout() throws {
        let daemon = try DaemonHarness(config: "[server]\nidle_timeout = 1s\n")
        try daemon.start()
        let idle = try daemon.connect()
        #expect(try idle.result("hello")["protocol_version"] == 1)
        let follower = try daemon.connect()
        #expect(try follower.result("admin.audit.tail", ["follow": true, "limit": 1])["subscription"] != nil)
        // Closed between one and two timeouts after the last request; the read is bounded.
        let started = Date()
        #expect(try idle.readLine() == nil, "the idle connection ends")
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(try follower.result("hello")["protocol_version"] == 1, "the subscribed one is still served")
    }

    @Test("64 clients that never read their answers are read no further: unread output and memory stay bounded, another user is served")
    func unreadAnswersAreBounded() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness()
        try daemon.start(arguments: ["--system"])
        chmod(daemon.directory + "/run", 0o755)
        let setup = try daemon.connect()
        // Root floods from 64 connections, 2000 hellos (~0.8 KB answers) each, never reading: 100 MB
        // of answers if authd kept them. Meanwhile a child as nobody asks hello 20 times, and the
        // parent samples the daemon's RSS and, on another connection, admin.status's unread output.
        let script = """
            import json, os, socket, sys, time
            path, pid = sys.argv[1], sys.argv[2]
            def rss():
                for line in open(f"/proc/{pid}/status"):
                    if line.startswith("VmRSS:"): return int(line.split()[1]) * 1024
            admin = socket.socket(socket.AF_UNIX); admin.settimeout(10); admin.connect(path); replies = admin.makefile("rb")
            def unread():
                admin.sendall(b'{"jsonrpc":"2.0","id":1,"method":"admin.status"}\\n')
                return json.loads(replies.readline())["result"]["unread_output_bytes"]
            idle = rss()
            request = b'{"jsonrpc":"2.0","id":1,"method":"hello"}\\n'
            floods = []
            for i in range(64):
                s = socket.socket(socket.AF_UNIX); s.connect(path); s.setblocking(False)
                try: s.send(request * 2000)
                except BlockingIOError: pass
                floods.append(s)
            child = os.fork()
            if child == 0:
                os.setgroups([]); os.setgid(65534); os.setuid(65534)
                c = socket.socket(socket.AF_UNIX); c.settimeout(10); c.connect(path); f = c.makefile("rb")
                answered = 0
                for i in range(20):
                    c.sendall(b'{"jsonrpc":"2.0","id":%d,"method":"hello"}\\n' % i)
                    if b'"protocol_version"' in f.readline(): answered += 1
                    time.sleep(0.1)
                os._exit(answered)
            # Sample until 3 s after the first unread answers show (the flood takes a while to fill
            # the sockets' kernel buffers on a busy machine), at most 90 s.
            peak, most = idle, 0
            deadline = time.time() + 90
            while time.time() < deadline:
                peak = max(peak, rss()); most = max(most, unread())
                if most > 0: deadline = min(deadline, time.time() + 3)
                time.sleep(0.25)
            _, status = os.waitpid(child, 0)
            print(idle, peak, most, os.waitstatus_to_exitcode(status))
            """
        let result = try DaemonHarness.run(["/usr/bin/timeout", "120", "/usr/bin/python3", "-c", script, daemon.socketPath, String(daemon.pid)])
        let figures = result.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(figures.count == 4, "\(result.stdout)\(result.stderr)")
        let (idle, peak, unread, answered) = (figures[0], figures[1], figures[2], figures[3])
        // Each flooder stops being read at 1 MiB unread; one that takes root past 16 MiB is closed.
        #expect(unread > 0 && unread <= 17 << 20, "unread output peaked at \(unread >> 10) KiB (16 MiB per user, plus one answer)")
        #expect(answered == 20, "the other user's 20 requests were all answered")
        #expect(peak - idle < 160 << 20, "RSS grew by \((peak - idle) >> 20) MiB")
        #expect(try setup.result("hello")["protocol_version"] == 1)
    }

    @Test("unfinished lines count toward a user's memory budget: 24 connections each holding almost 1 MiB of one line, past 16 MiB they are closed")
    func unfinishedLinesAreBounded() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness()
        try daemon.start(arguments: ["--system"])
        chmod(daemon.directory + "/run", 0o755)
        // A child as nobody opens 24 connections and sends each 1 MiB less 64 bytes of one line,
        // never finishing it; the parent (root, another user) reads admin.status meanwhile.
        let script = """
            import json, os, select, socket, sys, time
            path = sys.argv[1]
            ready_r, ready_w = os.pipe()
            child = os.fork()
            if child == 0:
                os.setgroups([]); os.setgid(65534); os.setuid(65534)
                part = b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"x":"' + b"x" * ((1 << 20) - 64)
                conns = []
                for i in range(24):
                    s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(path)
                    try: s.sendall(part)
                    except OSError: pass
                    conns.append(s)
                os.write(ready_w, b"x")
                # A closed connection reads as the end at once; an open one has nothing to read.
                time.sleep(1)
                readable, _, _ = select.select(conns, [], [], 0)
                closed = 0
                for s in readable:
                    try:
                        if s.recv(1, socket.MSG_DONTWAIT) == b"": closed += 1
                    except OSError: closed += 1
                os._exit(closed)
            os.read(ready_r, 1)
            time.sleep(0.5)
            admin = socket.socket(socket.AF_UNIX); admin.settimeout(10); admin.connect(path); replies = admin.makefile("rb")
            admin.sendall(b'{"jsonrpc":"2.0","id":1,"method":"admin.status"}\\n')
            held = json.loads(replies.readline())["result"]["unfinished_input_bytes"]
            _, status = os.waitpid(child, 0)
            admin.sendall(b'{"jsonrpc":"2.0","id":2,"method":"hello"}\\n')
            served = b'"protocol_version"' in replies.readline()
            print(held, os.waitstatus_to_exitcode(status), int(served))
            """
        let result = try DaemonHarness.run(["/usr/bin/timeout", "120", "/usr/bin/python3", "-c", script, daemon.socketPath])
        let figures = result.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(figures.count == 3, "\(result.stdout)\(result.stderr)")
        let (held, closed, served) = (figures[0], figures[1], figures[2])
        #expect(held <= 16 << 20, "unfinished lines held: \(held >> 10) KiB")
        #expect(closed >= 24 - 16, "\(closed) of 24 connections closed; 16 MiB holds at most 16 such lines")
        #expect(served == 1, "another user is served")
    }

    @Test("200 concurrent clients each get their own tokens")
    func concurrentClients() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let socket = daemon.socketPath
        let tokens = Mutex<[String]>([])
        let errors = onThreads(200) { index in
            let client = try LineClient(socketPath: socket)
            for round in 0..<5 {
                let audience = "client-\(index)-\(round)"
                let token = try #require(try client.result("auth.local", ["aud": .string(audience)])["token"]?.stringValue)
                let verified = try client.result("token.verify", ["token": .string(token), "aud": .string(audience)])
                #expect(verified["claims"]?["aud"] == .string(audience))
                tokens.withLock { $0.append(token) }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        let all = tokens.withLock { $0 }
        #expect(all.count == 1000)
        #expect(Set(all).count == 1000)
        let audit = try daemon.connect().result("admin.audit.tail", ["limit": 2000])["records"]?.arrayValue ?? []
        #expect(audit.filter { $0["method"] == "auth.local" && $0["outcome"] == "ok" }.count == 1000, "every token is audited")
    }

    @Test("connections opened and closed leak no file descriptors")
    func noDescriptorLeak() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let observer = try daemon.connect()
        _ = try observer.result("hello")
        // A first round creates whatever the runtime opens lazily; a leak shows in the rounds after.
        var before: Int64 = 0
        for round in 0..<5 {
            if round == 1 {
                _ = try observer.waitForConnectionCount(1)
                before = try #require(try observer.result("admin.status")["open_fds"]?.integerValue)
            }
            var clients: [LineClient] = []
            for _ in 0..<50 { clients.append(try daemon.connect()) }
            for (index, client) in clients.enumerated() {
                switch (index + round) % 3 {
                case 0: _ = try client.result("auth.local", ["aud": "x"])
                case 1: try client.send(#"{"jsonrpc":"2.0","id":1,"method":"he"#)
                default: break
                }
            }
            clients.removeAll()
        }
        // Closing is asynchronous in the daemon: wait (bounded) for the count to settle.
        let after = try observer.openDescriptorsOnceAlone(atMost: before)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.pid)/fd"))?.sorted().map { name in
            "\(name)→" + ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon.pid)/fd/\(name)")) ?? "?")
        } ?? []
        #expect(after <= before, "open: \(open)")
    }

    @Test("clients that send a partial line and close at once are all disconnected (EOF with data)")
    func partialLineThenClose() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let observer = try daemon.connect()
        for _ in 0..<100 {
            let client = try daemon.connect()
            try client.send(#"{"jsonrpc":"2.0","id":1,"meth"#)
            client.close()
        }
        #expect(try observer.waitForConnectionCount(1) == 1)
    }

    @Test("a client that disconnects mid-stream is cleaned up")
    func disconnectEndsStreams() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let observer = try daemon.connect()
        for _ in 0..<10 {
            let follower = try daemon.connect()
            _ = try follower.result("admin.audit.tail", ["follow": true, "limit": 0])
            follower.close()
        }
        #expect(try observer.waitForConnectionCount(1) == 1)
    }
}
