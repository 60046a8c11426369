import Foundation
import Synchronization

/// Runs `body` on `count` real threads at once. Blocking socket clients must not run on Swift's
/// cooperative pool (two threads on a two-core machine): they would not be concurrent at all.
/// Returns the errors thrown, if any.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) -> [any Error] {
    let errors = Mutex<[any Error]>([])
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            do { try body(index) } catch { errors.withLock { $0.append(error) } }
            group.leave()
        }
        thread.stackSize = 512 * 1024
        thread.start()
    }
    group.wait()
    return errors.withLock { $0 }
}

/// What threads report, in the order they report it.
final class Tally: Sendable {
    private let items = Mutex<[String]>([])
    func append(_ item: String) { items.withLock { $0.append(item) } }
    var all: [String] { items.withLock { $0 } }
    var count: Int { items.withLock { $0.count } }
}
