import Foundation
import Glibc
import OpenSSLCrypto
import Synchronization
@testable import authd

/// A private directory removed when the value goes away.
final class TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/authd-unit-XXXXXX".utf8CString)
        path = String(cString: mkdtemp(&template)!)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    private let current: Mutex<Date>
    init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Mutex(start) }
    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var closure: @Sendable () -> Date { { self.now } }
}

/// Store, sealer and key ring in a temporary directory.
struct TestKeys {
    let directory = TemporaryDirectory()
    let store: Store
    let sealer: Sealer
    let keys: KeyRing
    let clock = TestClock()

    init() async throws {
        store = try Store(path: directory.path + "/authd.db")
        sealer = try Sealer(masterKey: MasterKey(secret: try OpenSSL.randomSecret(32), source: .keyFile(path: directory.path + "/master.key")))
        keys = try await KeyRing.open(store: store, sealer: sealer, now: clock.now)
    }
}

/// Bytes from a hex string (test vectors).
func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}
