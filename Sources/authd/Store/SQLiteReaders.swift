import Synchronization

/// The SQLite store's readers, as GRDB's `DatabasePool` has them: connections that only read
/// (`SQLiteConnection(readingOnly:)`), each lent to one caller at a time and used on the
/// caller's own thread. WAL lets them read beside the one writer. A read of the account tables
/// (whose session a token is, on nearly every call) then neither hops to the store's queue and
/// back nor waits there behind commits and their syncs to disk.
///
/// At most `limit` are open, opened when first needed; a read that finds them all lent is
/// told so (`read` answers nil) and goes to the store's queue instead.
final class SQLiteReaders: Sendable {
    /// A reader's connection. Sendable because it has one user at a time: `idle` under the
    /// lock, then the caller of `read` that took it there.
    private final class Reader: @unchecked Sendable {
        let database: Database
        let connection: SQLiteConnection

        init(path: String) throws {
            connection = try SQLiteConnection(readingOnly: path)
            database = Database(.sqlite(connection))
        }
    }

    private struct State {
        var idle: [Reader] = []
        var open = 0
    }

    let path: String
    let limit: Int
    private let state = Mutex(State())

    init(path: String, limit: Int) {
        self.path = path
        self.limit = limit
    }

    /// Readers open now, lent or idle.
    var openCount: Int { state.withLock { $0.open } }

    /// Runs `body` in one read transaction on a reader, on the calling thread; nil when all
    /// `limit` readers are lent.
    func read<T>(_ body: (Database) throws -> T) throws -> T? {
        guard let reader = try take() else { return nil }
        defer { state.withLock { $0.idle.append(reader) } }
        return try reader.connection.readTransaction { try body(reader.database) }
    }

    private func take() throws -> Reader? {
        enum Taken { case reader(Reader), open, none }
        let taken = state.withLock { state -> Taken in
            if let reader = state.idle.popLast() { return .reader(reader) }
            guard state.open < limit else { return .none }
            state.open += 1
            return .open
        }
        switch taken {
        case .reader(let reader): return reader
        case .none: return nil
        case .open:
            do {
                return try Reader(path: path)
            } catch {
                state.withLock { $0.open -= 1 }
                throw error
            }
        }
    }
}
