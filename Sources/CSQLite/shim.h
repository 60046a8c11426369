#ifndef AUTHD_CSQLITE_SHIM_H
#define AUTHD_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro casting -1 to a destructor pointer; Swift cannot import it. */
static inline int authd_sqlite3_bind_blob_transient(sqlite3_stmt *s, int i, const void *p, int n) {
    return sqlite3_bind_blob(s, i, p, n, SQLITE_TRANSIENT);
}
static inline int authd_sqlite3_bind_text_transient(sqlite3_stmt *s, int i, const char *p, int n) {
    return sqlite3_bind_text(s, i, p, n, SQLITE_TRANSIENT);
}
/* sqlite3_config is variadic, which Swift cannot call either. With memory statistics off, an
   allocation of SQLite's no longer takes a process-wide mutex to count itself. */
static inline int authd_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
