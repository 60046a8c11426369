import CPostgreSQL

/// `[hub] database`: which PostgreSQL database holds the account data, as libpq reads it. The
/// password never sits in authd's configuration (which `admin status` and the log may show):
/// it comes from a password file (`passfile`, or `PGPASSFILE`), or the server trusts the
/// connection by its Unix socket's peer or a client certificate.
enum PostgreSQLTarget {
    static func check(_ value: String) throws(Config.ValueError) {
        guard value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") || value.contains("=") else {
            throw Config.ValueError(message: "must be a postgresql:// URI or a libpq keyword string such as \"host=/run/postgresql dbname=authd\"")
        }
        let pq: authd_libpq
        switch LibPQ.functions {
        case .success(let functions): pq = functions
        case .failure(let error): throw Config.ValueError(message: "needs Debian's libpq5 (\(error.message))")
        }
        switch PostgreSQLConnection.parameters(of: value, using: pq) {
        case .failure(let error):
            throw Config.ValueError(message: "is not a connection string libpq can read: \(error.message)")
        case .success(let parameters):
            if parameters["password"] != nil {
                throw Config.ValueError(message: "must not hold a password (it would show wherever the configuration does): put it in a password file, named by passfile= or PGPASSFILE")
            }
        }
    }
}
