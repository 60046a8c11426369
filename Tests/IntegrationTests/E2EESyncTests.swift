import Foundation
import Glibc
import Protocol
import Testing

/// End-to-end encrypted sync over a real hub and real devices (see HubRig): what the hub keeps
/// and relays, what each machine reads, and what it refuses to read.
@Suite("End-to-end encrypted sync")
struct E2EESyncTests {
    /// A string no run has seen, to look for in the hub's files.
    static func marker() -> String { "e2ee-marker-" + UUID().uuidString }

    /// Whether `needle` is anywhere in the hub's store: its database, WAL and shared memory.
    static func hubFilesContain(_ hub: DaemonHarness, _ needle: String) throws -> Bool {
        let bytes = Array(needle.utf8)
        for path in try files(of: hub) {
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            if Array(data).firstRange(of: bytes) != nil { return true }
        }
        return false
    }

    /// Where the hub's account data is on disk: its SQLite files, or on PostgreSQL (after a
    /// checkpoint writes every page out) its database's files and the cluster's WAL.
    static func files(of hub: DaemonHarness) throws -> [String] {
        guard let database = hub.accountDatabase else {
            return ["authd.db", "authd.db-wal", "authd.db-shm"].map { hub.stateDirectory + "/" + $0 }
        }
        let cluster = try PostgreSQLCluster.shared.get()
        try cluster.psql("CHECKPOINT")
        let oid = try #require(try cluster.psql("SELECT oid FROM pg_database WHERE datname = '\(database.name)'").first)
        return ["/data/base/\(oid)", "/data/pg_wal"].flatMap { folder in
            ((try? FileManager.default.contentsOfDirectory(atPath: cluster.directory + folder)) ?? []).map { cluster.directory + folder + "/" + $0 }
        }
    }

    /// The sealed value the hub keeps at `position`, and the device ids it is encrypted to and
    /// signed by, as python3-jwcrypto reads them: the JWS checked with the signer's published
    /// key (from the hub's own table), the JWE parsed as RFC 7516 General JSON.
    static func inspect(_ hub: DaemonHarness, position: Int64) throws -> (recipients: Set<String>, signer: String) {
        let row = try #require(try hub.storeRows("SELECT e.sealed, hex(k.spki), k.device_id FROM sync_events e JOIN device_e2ee_keys k ON k.device_id = e.device_id WHERE e.position = \(position)").first)
        let parts = row.split(separator: "|").map(String.init)
        let script = """
            import base64, sys, json
            from cryptography.hazmat.primitives.serialization import load_der_public_key, Encoding, PublicFormat
            from jwcrypto import jwk, jws
            sealed, spki = sys.argv[1], bytes.fromhex(sys.argv[2])
            key = jwk.JWK.from_pem(load_der_public_key(spki).public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
            token = jws.JWS()
            token.deserialize(sealed)
            token.verify(key, alg='ES256')
            jwe = json.loads(token.payload)
            print(json.dumps({'signer': token.jose_header['kid'], 'recipients': [r['header']['kid'] for r in jwe['recipients']],
                              'enc': json.loads(base64.urlsafe_b64decode(jwe['protected'] + '=' * (-len(jwe['protected']) % 4)))['enc'],
                              'alg': sorted({r['header']['alg'] for r in jwe['recipients']})}))
            """
        let result = try DaemonHarness.run(["/usr/bin/python3", "-c", script, parts[0], parts[1]])
        guard result.status == 0 else { throw HarnessError("jwcrypto did not verify the hub's sealed event: \(result.stderr)") }
        let seen = try WireCodec.decode(JSONValue.self, from: Data(result.stdout.utf8))
        #expect(seen["enc"] == "A256GCM" && seen["alg"] == ["ECDH-ES+A256KW"])
        #expect(seen["signer"]?.stringValue == parts[2], "signed by the machine the hub says sent it")
        return (Set(seen["recipients"]?.arrayValue?.compactMap(\.stringValue) ?? []), seen["signer"]?.stringValue ?? "")
    }

    static func deviceID(_ daemon: DaemonHarness) throws -> String {
        try #require(try daemon.connect().result("device.id")["device_id"]?.stringValue)
    }

    @Test("a message from A reaches B and A's own apps decrypted and marked encrypted; the hub's database and WAL never hold its text; jwcrypto verifies the sender's signature and finds exactly A and B as recipients; the hub refuses plain text for the account")
    func endToEnd() throws {
        // Room for a third session, on the hub itself.
        let pair = try SyncTests.Pair(hubConfig: "[accounts]\ndevice_limit = 3")
        let (rig, a, b, clientA, clientB, onA, onB) = pair.parts
        let (watchA, _) = try SyncTests.subscribe(a, session: onA)
        let (watchB, _) = try SyncTests.subscribe(b, session: onB)
        let secret = Self.marker()
        let sent = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "family", "body": ["text": .string(secret)]])
        let position = try #require(sent["position"]?.integerValue)

        let onBSide = try SyncTests.next(watchB)["params"]?["event"]
        #expect(onBSide?["body"]?["text"]?.stringValue == secret && onBSide?["encrypted"] == true, "B reads it: \(String(describing: onBSide))")
        #expect(onBSide?["sealed"] == nil, "apps never see the sealed form")
        let onASide = try SyncTests.next(watchA)["params"]?["event"]
        #expect(onASide?["body"]?["text"]?.stringValue == secret, "the sender's other apps read it back")
        let history = try clientB.result("sync.history", ["session": onB, "conversation": "family"])
        #expect(history["events"]?.arrayValue?.first?["body"]?["text"]?.stringValue == secret && history["events"]?.arrayValue?.first?["encrypted"] == true)

        // The hub: ciphertext only, to exactly the account's two machines, signed by A.
        #expect(try !Self.hubFilesContain(rig.hub, secret), "the body's text is nowhere in the hub's files")
        #expect(try rig.hub.storeRows("SELECT body FROM sync_events WHERE position = \(position)") == ["null"])
        let (recipients, signer) = try Self.inspect(rig.hub, position: position)
        #expect(recipients == [try Self.deviceID(a), try Self.deviceID(b)])
        #expect(signer == (try Self.deviceID(a)))
        // What the hub's own apps read of it is the sealed form, never the text.
        let atHub = try rig.hub.connect()
        let onHub = try #require(try atHub.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])
        let hubHistory = try atHub.result("sync.history", ["session": onHub, "conversation": "family"])
        #expect(hubHistory["events"]?.arrayValue?.first?["sealed"]?.stringValue?.isEmpty == false && hubHistory["events"]?.arrayValue?.first?["body"] == JSONValue.null)
        let plain = try atHub.call("sync.send", ["session": onHub, "kind": "message", "conversation": "family", "body": ["text": "in the clear"]])
        #expect(plain.errorReason == "sync.e2ee_required", "\(plain)")
        let forged = try atHub.call("sync.send", ["session": onHub, "kind": "message", "body": .null, "sealed": "a.b.c"])
        #expect(forged.errorCode == -32602, "only a device's own link may send a sealed body: \(forged)")
        // read markers and dismissals stay visible: the hub needs them for unread counts.
        let read = try clientB.result("sync.read", ["session": onB, "conversation": "family", "up_to": .integer(position)])
        #expect(read["moved"] == true)
    }

    @Test("a device linked later is announced on every machine with its name and cannot read what was sent before it; what is sent after reaches it; once removed, nothing sent afterwards is encrypted to it")
    func newAndRemovedDevices() throws {
        let pair = try SyncTests.Pair(hubConfig: "[accounts]\ndevice_limit = 3")
        let (rig, a, _, clientA, clientB, onA, onB) = pair.parts
        let before = Self.marker()
        _ = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": .string(before)]])
        let (watchA, _) = try SyncTests.subscribe(a, session: onA)

        let c = try rig.startDevice()
        _ = try c.connect().result("device.name", ["name": "kitchen tablet"])
        let clientC = try c.connect()
        let onC = try #require(try clientC.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])
        let notice = try SyncTests.next(watchA)["params"]?["event"]
        let idC = try Self.deviceID(c)
        #expect(notice?["kind"] == "device.linked" && notice?["body"]?["name"] == "kitchen tablet" && notice?["body"]?["device_id"]?.stringValue == idC,
                "A is told of the new device: \(String(describing: notice))")

        let old = try clientC.result("sync.history", ["session": onC, "conversation": "c"])["events"]?.arrayValue?.first
        #expect(old?["withheld"] == "e2ee.not_a_recipient" && old?["body"] == JSONValue.null, "sent before C existed: \(String(describing: old))")
        let after = Self.marker()
        let sent = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": .string(after)]])
        let onCSide = try clientC.result("sync.history", ["session": onC, "conversation": "c", "limit": 1])["events"]?.arrayValue?.first
        #expect(onCSide?["body"]?["text"]?.stringValue == after)
        #expect(try Self.inspect(rig.hub, position: try #require(sent["position"]?.integerValue)).recipients.contains(try Self.deviceID(c)))

        // B removes C: the next send from A is to A and B only.
        let devices = try clientB.result("device.list", ["session": onB])["devices"]?.arrayValue ?? []
        let rowC = try #require(devices.first { $0["device_id"]?.stringValue == (try? Self.deviceID(c)) }?["id"])
        _ = try clientB.result("device.revoke", ["session": onB, "id": rowC])
        let last = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": "after removal"]])
        let recipients = try Self.inspect(rig.hub, position: try #require(last["position"]?.integerValue)).recipients
        #expect(recipients == [try Self.deviceID(a), try Self.deviceID(pair.b)], "the removed machine is not a recipient")
        let ended = try clientC.call("sync.history", ["session": onC])
        #expect(["session.invalid", "device.revoked"].contains(ended.errorReason ?? ""), "and its session ended: \(ended)")
    }

    @Test("the hub cannot slip in a key: a key statement B did not sign stops A's send with e2ee.bad_device_key naming B; an event the hub altered or forged reaches B withheld with the reason, never as text")
    func hubTampering() throws {
        let pair = try SyncTests.Pair()
        let (rig, _, b, clientA, clientB, onA, onB) = pair.parts
        let idB = try Self.deviceID(b)

        // The hub swaps B's key statement for one B did not sign (A's own). B publishes its key
        // as its link comes up, beside the sign-in: wait (bounded) until the hub holds it.
        let deadline = ContinuousClock.now + .seconds(15)
        var published: String?
        while published == nil, ContinuousClock.now < deadline {
            published = try rig.hub.storeRows("SELECT statement FROM device_e2ee_keys WHERE device_id = '\(idB)'").first
            if published == nil { usleep(20_000) }
        }
        let genuine = try #require(published, "B published no key")
        _ = try rig.hub.storeRows("UPDATE device_e2ee_keys SET statement = (SELECT statement FROM device_e2ee_keys WHERE device_id != '\(idB)') WHERE device_id = '\(idB)'",
                                  readOnly: false)
        let refused = try clientA.call("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": "to a forged key"]])
        #expect(refused.errorReason == "e2ee.bad_device_key", "\(refused)")
        #expect(refused["error"]?["message"]?.stringValue?.contains(idB) == true, "the message names the device: \(refused)")
        _ = try rig.hub.storeRows("UPDATE device_e2ee_keys SET statement = '\(genuine)' WHERE device_id = '\(idB)'", readOnly: false)

        let sent = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": "genuine"]])
        let position = try #require(sent["position"]?.integerValue)
        // The hub alters the stored event (one character of the signed payload) and forges one
        // from nothing, each at a new position of the log.
        let stored = try #require(try rig.hub.storeRows("SELECT sealed FROM sync_events WHERE position = \(position)").first)
        var parts = stored.split(separator: ".").map(String.init)
        let middle = parts[1].index(parts[1].startIndex, offsetBy: parts[1].count / 2)
        parts[1].replaceSubrange(middle...middle, with: parts[1][middle] == "A" ? "B" : "A")
        for (offset, sealed) in [parts.joined(separator: "."), "eyJhbGciOiJub25lIn0.e30."].enumerated() {
            _ = try rig.hub.storeRows("""
                INSERT INTO sync_events (account_id, position, kind, conversation, body, device_key, machine, device_id, exe, idempotency_key, created_at, sealed)
                SELECT account_id, position + \(offset + 1), kind, conversation, body, device_key, machine, device_id, exe, 'forged-\(offset)', created_at, '\(sealed)'
                FROM sync_events WHERE position = \(position)
                """, readOnly: false)
        }
        _ = try rig.hub.storeRows("UPDATE sync_heads SET position = position + 2", readOnly: false)
        let events = try clientB.result("sync.history", ["session": onB, "conversation": "c"])["events"]?.arrayValue ?? []
        #expect(events.count == 3)
        #expect(events.first { $0["idempotency_key"] == "forged-0" }?["withheld"] == "e2ee.bad_signature", "\(events)")
        #expect(events.first { $0["idempotency_key"] == "forged-1" }?["withheld"]?.stringValue?.hasPrefix("e2ee.") == true, "\(events)")
        #expect(events.filter { $0["body"] != .null }.map { $0["body"]?["text"] } == ["genuine"], "only the genuine one is shown")
    }

    @Test("a sealed body names its account: the same body copied by the hub into another account's log, both accounts on the same two machines, reaches that account withheld as e2ee.tampered")
    func movedToAnotherAccount() throws {
        let pair = try SyncTests.Pair()
        let (rig, a, _, clientA, clientB, onA, _) = pair.parts
        let first = try #require(try clientA.result("session.get", ["session": onA])["account"]?["id"]?.stringValue)
        let registered = try rig.register(on: a, phone: "+37251230002")
        let second = try #require(registered["account"]?["id"]?.stringValue)
        let onB2 = try #require(try clientB.result("auth.login", ["login": "+37251230002", "password": "a long enough passphrase"])["session"]?["token"])
        let sent = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": "for the first account"]])
        let position = try #require(sent["position"]?.integerValue)
        _ = try rig.hub.storeRows("""
            INSERT INTO sync_events (account_id, position, kind, conversation, body, device_key, machine, device_id, exe, idempotency_key, created_at, sealed)
            SELECT '\(second)', (SELECT position FROM sync_heads WHERE account_id = '\(second)') + 1, kind, conversation, body, device_key, machine, device_id,
                   exe, idempotency_key, created_at, sealed
            FROM sync_events WHERE account_id = '\(first)' AND position = \(position)
            """, readOnly: false)
        _ = try rig.hub.storeRows("UPDATE sync_heads SET position = position + 1 WHERE account_id = '\(second)'", readOnly: false)
        let events = try clientB.result("sync.history", ["session": onB2, "conversation": "c"])["events"]?.arrayValue ?? []
        #expect(events.count == 1, "\(events)")
        #expect(events.first?["withheld"] == "e2ee.tampered" && events.first?["body"] == .null, "never shown to the other account: \(events)")
    }

    @Test("only a machine that holds a session publishes its key: a stranger's well-signed statement is hub.not_signed_in and kept nowhere, and taken once that machine signs in; a device linked before it signed in has its key at the hub when its sign-in is answered")
    func publishingNeedsASession() throws {
        let rig = try HubRig()
        let stranger = try rig.handMadeMachine(name: "stranger")
        // The statement a device makes (PublishedDeviceKey), made here with the key of the
        // stranger's certificate, so that only the missing session can be why it is refused.
        let script = """
            import base64, hashlib, json, sys
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec, utils
            def b64(data):
                return base64.urlsafe_b64encode(data).decode().rstrip('=')
            with open(sys.argv[1], 'rb') as file:
                key = serialization.load_pem_private_key(file.read(), password=None)
            spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
            digits = base64.b32encode(hashlib.sha256(spki).digest()).decode().rstrip('=')
            device_id = '-'.join(digits[i:i + 4] for i in range(0, len(digits), 4))
            point = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()
            jwk = {'kty': 'EC', 'crv': 'P-256', 'x': b64(point.x.to_bytes(32, 'big')), 'y': b64(point.y.to_bytes(32, 'big')),
                   'use': 'enc', 'alg': 'ECDH-ES+A256KW', 'kid': device_id}
            signing_input = b64(json.dumps({'alg': 'ES256', 'kid': device_id, 'typ': 'authd-e2ee-key'}).encode()) + '.' + \\
                b64(json.dumps({'device_id': device_id, 'jwk': jwk}).encode())
            r, s = utils.decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
            # The low S of the two that verify: authd takes no other (a signature has one spelling).
            s = min(s, 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551 - s)
            statement = signing_input + '.' + b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))
            print(json.dumps({'spki': b64(spki), 'statement': statement}))
            """
        let made = try DaemonHarness.run(["/usr/bin/python3", "-c", script, rig.directory + "/stranger.key"])
        guard made.status == 0 else { throw HarnessError("the statement could not be made: \(made.stderr)") }
        let statement = try WireCodec.decode(JSONValue.self, from: Data(made.stdout.utf8))
        let refused = try stranger.call("link.e2ee.publish", statement)
        #expect(refused["error"]?["data"]?["reason"] == "hub.not_signed_in", "\(refused)")
        #expect(try rig.hub.storeRows("SELECT count(*) FROM device_e2ee_keys") == ["0"], "no row for a machine of no account")

        _ = try rig.register(on: stranger, phone: "+37251234567")
        let taken = try stranger.call("link.e2ee.publish", statement)
        #expect(taken["result"]?["ok"] == true, "signed in, the same statement is taken: \(taken)")
        #expect(try rig.hub.storeRows("SELECT count(*) FROM device_e2ee_keys") == ["1"])

        // A real device: its link comes up before it signs in, and its key is at the hub as soon
        // as the sign-in is answered, so that the account's other machines encrypt to it.
        let device = try rig.startDevice()
        _ = try rig.register(on: device, phone: "+37251234568")
        #expect(try rig.hub.storeRows("SELECT count(*) FROM device_e2ee_keys WHERE device_id = '\(try Self.deviceID(device))'") == ["1"])
    }

    @Test("an admin turns an account's encryption off and on: off, bodies travel in the clear and the hub keeps them; on again, they are sealed; admin accounts show says which")
    func accountSetting() throws {
        let pair = try SyncTests.Pair()
        let (rig, _, _, clientA, _, onA, _) = pair.parts
        let shown = try rig.hub.authctl(["--json", "admin", "accounts", "show", "+37251234567"])
        #expect(shown.status == 0 && shown.stdout.contains("\"e2ee\":\"required\""), "new accounts are encrypted: \(shown.stdout)")
        let off = try rig.hub.authctl(["admin", "accounts", "e2ee", "+37251234567", "off"])
        #expect(off.status == 0 && off.stdout.contains("not end-to-end encrypted"), "\(off.stdout) \(off.stderr)")
        let clear = Self.marker()
        _ = try clientA.result("sync.send", ["session": onA, "kind": "message", "body": ["text": .string(clear)]])
        #expect(try Self.hubFilesContain(rig.hub, clear), "off: the hub keeps the text")
        #expect(try rig.hub.authctl(["admin", "accounts", "e2ee", "+37251234567", "required"]).status == 0)
        let sealed = Self.marker()
        _ = try clientA.result("sync.send", ["session": onA, "kind": "message", "body": ["text": .string(sealed)]])
        #expect(try !Self.hubFilesContain(rig.hub, sealed), "on again: sealed at once (the hub said the recipients changed)")
        let bad = try rig.hub.authctl(["admin", "accounts", "e2ee", "+37251234567", "sometimes"])
        #expect(bad.status != 0)
    }
}
