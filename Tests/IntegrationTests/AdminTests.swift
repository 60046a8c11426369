import Foundation
import Glibc
import Protocol
import Testing

@Suite("Admin")
struct AdminTests {
    @Test("admin.status reports mode, paths, keys, store health and this connection")
    func status() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let status = try daemon.connect().result("admin.status")
        #expect(status["mode"] == "user")
        #expect(status["pid"]?.integerValue == Int64(daemon.pid))
        #expect(status["paths"]?["socket"] == .string(daemon.socketPath))
        #expect(status["paths"]?["database"] == .string(daemon.stateDirectory + "/authd.db"))
        #expect(status["store"]?["integrity"] == "ok")
        #expect(status["store"]?["journal_mode"] == "wal")
        #expect(status["store"]?["schema_version"] == 24)  // the latest migration; bump with each new one
        #expect(status["connections"] == 1)
        #expect((status["rss_bytes"]?.integerValue ?? 0) > 1_000_000)
        #expect(status["password_hashing_bytes"] == 0)  // nothing hashed yet
        #expect(status["keys"]?.arrayValue?.count == 1)
    }

    @Test("admin.backup writes a consistent, private copy and never overwrites")
    func backup() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        _ = try client.result("auth.local", ["aud": "x"])
        let path = daemon.directory + "/backup.db"
        let result = try client.result("admin.backup", ["path": .string(path)])
        #expect(result["bytes"]?.integerValue ?? 0 > 0)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let check = try DaemonHarness.run(["/usr/bin/python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            print(db.execute("PRAGMA integrity_check").fetchone()[0], db.execute("SELECT count(*) FROM signing_keys").fetchone()[0], db.execute("SELECT count(*) FROM audit WHERE method = 'auth.local'").fetchone()[0])
            """, path])
        if daemon.accountDatabase == nil {
            #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok 1 1")
            #expect(result["account_data"] == nil)
        } else {
            // The audit log is with the account data, in PostgreSQL, which the copy does not hold and says so.
            #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok 1 0")
            #expect(result["account_data"]?.stringValue?.contains("pg_dump") == true)
            #expect(try daemon.storeRows("SELECT count(*) FROM audit WHERE method = 'auth.local'") == ["1"])
        }
        let again = try client.call("admin.backup", ["path": .string(path)])
        #expect(again.errorReason == "admin.backup_failed")
        #expect(try client.call("admin.backup", ["path": "relative.db"]).errorReason == "rpc.invalid_params")
        #expect(try client.call("admin.backup", ["path": .string(daemon.directory + "/missing/dir/b.db")]).errorReason == "admin.backup_failed")
        #expect(access(daemon.directory + "/missing", F_OK) != 0)
    }

    @Test("admin.audit.tail follows new records until subscription.cancel")
    func followAudit() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let follower = try daemon.connect()
        let other = try daemon.connect()
        _ = try other.result("auth.local", ["aud": "before"])
        let started = try follower.result("admin.audit.tail", ["follow": true, "limit": 5])
        #expect(started["records"]?.arrayValue?.last?["detail"]?["aud"] == "before")
        let subscription = try #require(started["subscription"]?.stringValue)
        _ = try other.result("auth.local", ["aud": "after"])
        // The follow request is itself audited: its own record may come first.
        var notification = try #require(try follower.readJSON())
        if notification["params"]?["record"]?["method"] == "admin.audit.tail" { notification = try #require(try follower.readJSON()) }
        #expect(notification["method"] == "audit.record")
        #expect(notification["id"] == nil)
        #expect(notification["params"]?["subscription"] == .string(subscription))
        #expect(notification["params"]?["record"]?["detail"]?["aud"] == "after")
        #expect(notification["params"]?["record"]?["caller"]?["pid"]?.integerValue == Int64(getpid()))
        // The followed record and the same record read back are identical, time included.
        let recordID = notification["params"]?["record"]?["id"]
        let stored = try #require(try other.result("admin.audit.tail", ["limit": 10])["records"]?.arrayValue?.first { $0["id"] == recordID })
        #expect(stored == notification["params"]?["record"])
        #expect(try follower.result("subscription.cancel", ["subscription": .string(subscription)])["cancelled"] == true)
        _ = try other.result("auth.local", ["aud": "ignored"])
        // After cancel the next line on the follower is the answer to its next call, not a record.
        let response = try follower.call("subscription.cancel", ["subscription": .string(subscription)])
        #expect(response.errorReason == "subscription.unknown")
    }

    @Test("system mode: any user gets a token for their own uid; only root/admin group may call admin methods")
    func systemModeAuthorization() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness()
        try daemon.start(arguments: ["--system"])
        chmod(daemon.directory + "/run", 0o755)
        let token = try daemon.authctl(["token", "local", "--aud", "svc"], user: "nobody")
        #expect(token.status == 0, "\(token.stderr)")
        let claims = try daemon.connect().result("token.verify", ["token": .string(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))])["claims"]
        #expect(claims?["sub"] == "unix:65534")
        let status = try daemon.authctl(["admin", "status"], user: "nobody")
        #expect(status.status == 1)
        #expect(status.stderr.contains("(auth.forbidden)"))
        #expect(try daemon.authctl(["admin", "status"]).status == 0)
        let denied = try #require(try daemon.connect().result("admin.audit.tail")["records"]?.arrayValue)
        #expect(denied.contains { $0["method"] == "admin.status" && $0["outcome"] == "denied" && $0["caller"]?["uid"] == 65534 })
    }

    @Test("system mode: one user cannot hold more than max_connections_per_user; root is exempt")
    func perUserLimit() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness(config: "[server]\nmax_connections_per_user = 4\n")
        try daemon.start(arguments: ["--system"])
        chmod(daemon.directory + "/run", 0o755)
        // As nobody: open 5 connections and report what the fifth one is told.
        let script = """
            import socket, sys
            held = []
            for i in range(5):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10); held.append(s)
            # The refused fifth connection is told why at once, before it sends anything.
            print(held[-1].makefile().readline().strip())
            held[0].sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello"}\\n')
            print(held[0].makefile().readline().strip())
            """
        let result = try DaemonHarness.run(["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", script, daemon.socketPath])
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 2, "\(result.stdout)\(result.stderr)")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.first?.contains(#""reason":"server.busy""#) == true)
        #expect(lines.last?.contains(#""uid":65534"#) == true, "the first four connections work")
        // Root is not limited (admins must always get in).
        var rootClients: [LineClient] = []
        for _ in 0..<6 { rootClients.append(try daemon.connect()) }
        #expect(try rootClients.last?.result("hello")["caller"]?["uid"] == 0)
    }

    @Test("system mode: when users hold every connection up to max_connections, root still gets in")
    func adminReserve() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness(config: "[server]\nmax_connections = 16\nmax_connections_per_user = 100\n")
        try daemon.start(arguments: ["--system"])
        chmod(daemon.directory + "/run", 0o755)
        // A child as nobody holds 16 connections (each proved served) and reports what a 17th
        // is told; while it still holds them, root (this script's parent) connects.
        let script = """
            import os, socket, sys
            def connect():
                s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); return s
            report_r, report_w = os.pipe(); done_r, done_w = os.pipe()
            child = os.fork()
            if child == 0:
                os.setgroups([]); os.setgid(65534); os.setuid(65534)
                held = []
                for i in range(16):
                    s = connect(); held.append(s)
                    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello"}\\n'); s.makefile().readline()
                os.write(report_w, connect().makefile().readline().encode())
                os.read(done_r, 1)
                os._exit(0)
            print(os.read(report_r, 4096).decode().strip())
            root = connect()
            root.sendall(b'{"jsonrpc":"2.0","id":2,"method":"admin.status"}\\n')
            print(root.makefile().readline().strip())
            os.write(done_w, b"x"); os.waitpid(child, 0)
            """
        let result = try DaemonHarness.run(["/usr/bin/timeout", "30", "/usr/bin/python3", "-c", script, daemon.socketPath])
        let lines = result.stdout.split(separator: "\n")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.count == 2, "\(result.stdout)")
        #expect(lines.first?.contains(#""reason":"server.busy""#) == true, "the 17th user connection is refused")
        #expect(lines.last?.contains(#""result":{"#) == true && lines.last?.contains(#""connections":"#) == true, "root gets in beyond the cap: \(lines.last ?? "")")
    }

    @Test("user mode: other users cannot even connect")
    func userModeRefusesOthers() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness()
        try daemon.start()
        chmod(daemon.directory + "/run", 0o755)
        chmod(daemon.socketPath, 0o666)
        let result = try daemon.authctl(["status"], user: "nobody")
        #expect(result.status == 1)
        #expect(result.stderr.contains("serves only its own user"))
        #expect(result.stderr.contains("(auth.forbidden)"))
        #expect(daemon.log.contains("refused a connection from another user"))
    }
}
